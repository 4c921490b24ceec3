//! The policy at exec time: what the kernel is about to run (a file, after links and `#!`
//! lines) against the blocklist, by name and by identity, the allowlist, the allowed
//! directories and what needs privileges. The parse-time check (`policy`) is the early,
//! explainable refusal; this is the guarantee, because every program ends in an exec.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::hash::Hasher;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::base::policy::{Effective, Policy};
pub use crate::platform::exec_check::{Exec, Refusal, Target, Verdict};

/// Policies whose blocked files are kept resolved.
const CACHED: usize = 16;
/// Shells whose execs an allowlist governs.
const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// Programs that run one of many tools named by their first argument or the name they are
/// called by, without an exec of their own.
const MULTI_CALL: [&str; 3] = ["busybox", "toybox", "coreutils"];

/// Named programs found as files: their identities, and sizes and hashes for copies.
#[derive(Debug, Default)]
pub struct Identities {
    files: HashMap<(u64, u64), String>,
    by_size: HashMap<u64, Vec<(u64, String)>>,
}

/// SipHash of the whole file, read by offset (the descriptor's own offset is left alone).
fn hash_file(file: &File) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut h = std::hash::DefaultHasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = 0u64;
    loop {
        match file.read_at(&mut buf, at) {
            Ok(0) => return Some(h.finish()),
            Ok(n) => {
                h.write(&buf[..n]);
                at += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// What a file was found to be, by identity.
enum Known<'a> {
    /// The very file (its device and inode), or a copy of it.
    Is(&'a str, bool),
    /// A file the daemon cannot read, the size of one: it cannot be told from a copy.
    Unreadable(&'a str),
}

impl Identities {
    /// Looks for every name `wanted` accepts in `PATH` and the usual directories.
    fn resolve(wanted: &dyn Fn(&str) -> bool) -> Identities {
        let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        // A blocked name is looked for as a file there too when a policy is loaded.
        dirs.extend(crate::platform::SYSTEM_BIN_DIRS.iter().map(PathBuf::from));
        let mut seen = HashSet::new();
        let mut out = Identities::default();
        for dir in dirs {
            let Ok(canon) = std::fs::canonicalize(&dir) else {
                continue;
            };
            if !seen.insert(canon.clone()) {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&canon) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !wanted(&name) {
                    continue;
                }
                let Ok(file) = File::open(e.path()) else {
                    continue;
                };
                let Ok(meta) = file.metadata() else { continue };
                if !meta.is_file() || out.files.contains_key(&(meta.dev(), meta.ino())) {
                    continue;
                }
                out.files.insert((meta.dev(), meta.ino()), name.clone());
                if let Some(h) = hash_file(&file) {
                    out.by_size.entry(meta.size()).or_default().push((h, name));
                }
            }
        }
        out
    }

    fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The name `t` is known as, by identity or as a copy.
    fn of(&self, t: &Target) -> Option<Known<'_>> {
        if let Some(name) = self.files.get(&(t.dev, t.ino)) {
            return Some(Known::Is(name, false));
        }
        let same_size = self.by_size.get(&t.size)?;
        if !t.readable {
            return same_size
                .first()
                .map(|(_, n)| Known::Unreadable(n.as_str()));
        }
        let h = hash_file(&t.file)?;
        same_size
            .iter()
            .find(|(x, _)| *x == h)
            .map(|(_, n)| Known::Is(n.as_str(), true))
    }

    /// The name `t` is, when it is that very file or a copy of it.
    fn name(&self, t: &Target) -> Option<&str> {
        match self.of(t)? {
            Known::Is(n, _) => Some(n),
            Known::Unreadable(_) => None,
        }
    }
}

/// Resolved identities per set of names, shared by every process under the same policy.
fn identities(names: &BTreeSet<String>) -> Arc<Identities> {
    static CACHE: Mutex<Vec<(BTreeSet<String>, Arc<Identities>)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, ids)) = cache.iter().find(|(b, _)| b == names) {
        return ids.clone();
    }
    let ids = Arc::new(Identities::resolve(&|n| names.contains(n)));
    if cache.len() >= CACHED {
        cache.remove(0);
    }
    cache.push((names.clone(), ids.clone()));
    ids
}

/// The programs an `ask` pattern names by a plain word (`git` of `git push`).
fn ask_programs(rules: &Policy) -> BTreeSet<String> {
    rules
        .ask
        .commands
        .iter()
        .filter_map(|p| p.split_whitespace().next())
        .filter(|w| !w.contains(['*', '?']))
        .map(str::to_string)
        .collect()
}

/// What one tree's execs are held to.
pub struct ExecRules {
    rules: Policy,
    /// The blocked names' files.
    identities: Arc<Identities>,
    /// The files of programs `ask` patterns name, and of multi-call programs.
    asked: Arc<Identities>,
    multi: Arc<Identities>,
    /// Setuid and setgid programs cannot gain privileges in the tree (`no_new_privs`).
    no_new_privs: bool,
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A refusal of `program` by `rule`.
fn refuse(rule: &'static str, program: &Target, message: String) -> Refusal {
    Refusal {
        rule,
        program: program.path().display().to_string(),
        message,
        errno: libc::EACCES,
    }
}

impl ExecRules {
    pub fn new(policy: &Effective, no_new_privs: bool) -> ExecRules {
        let rules = policy.rules().clone();
        let multi: BTreeSet<String> = MULTI_CALL.iter().map(|s| s.to_string()).collect();
        ExecRules {
            identities: identities(&rules.blocked),
            asked: identities(&ask_programs(&rules)),
            multi: identities(&multi),
            rules,
            no_new_privs,
        }
    }

    /// Resolves a policy's blocked files now (at a load), so the first exec does not pay.
    pub fn preload(policy: &Policy) {
        identities(&policy.blocked);
        identities(&ask_programs(policy));
        identities(&MULTI_CALL.iter().map(|s| s.to_string()).collect());
    }

    /// Whether the arguments of an exec of `t` are needed: an `ask` pattern could name it
    /// (by its name, or as the file a named program is), or it runs the tool it is called as.
    pub fn wants_argv(&self, t: &Target) -> bool {
        let asked = !self.rules.ask.commands.is_empty()
            && (self.rules.ask.command(&t.name, &[None; 16]).is_some()
                || (!self.asked.is_empty() && self.asked.name(t).is_some()));
        asked || self.multi_call(t).is_some()
    }

    /// The multi-call program `t` is (by its name, or as that file or a copy).
    fn multi_call(&self, t: &Target) -> Option<String> {
        if MULTI_CALL.contains(&t.name.as_str()) {
            return Some(t.name.clone());
        }
        self.multi.name(t).map(str::to_string)
    }

    /// The verdict on an exec: refused, asked about, or allowed.
    pub fn decide(&self, e: &Exec) -> Verdict {
        match self.refusal(e) {
            Some(r) => Verdict::Refuse(r),
            None => match self.ask(e) {
                Some(rule) => Verdict::Ask(rule),
                None => Verdict::Allow,
            },
        }
    }

    /// The `ask` pattern the exec matches: its program (by real name, the name it was called
    /// by, or the named program it is as a file) and arguments; or, for the program a loader
    /// was given, that program and the arguments after it.
    fn ask(&self, e: &Exec) -> Option<String> {
        if self.rules.ask.commands.is_empty() {
            return None;
        }
        let t = e.target.as_ref()?;
        let given = file_name(Path::new(&e.path));
        let matched = |t: &Target, also: &str, argv: &[String]| {
            let args: Vec<Option<&str>> = argv.iter().skip(1).map(|a| Some(a.as_str())).collect();
            let known = self.asked.name(t).unwrap_or_default();
            [t.name.as_str(), also, known]
                .into_iter()
                .filter(|n| !n.is_empty())
                .find_map(|name| self.rules.ask.command(name, &args))
                .map(|pattern| format!("ask_commands: {pattern}"))
        };
        if let Some(argv) = &e.argv {
            if let Some(rule) = matched(t, &given, argv) {
                return Some(rule);
            }
        }
        e.runs.iter().find_map(|r| matched(&r.target, "", &r.argv))
    }

    /// What refuses file `f` (the `i`th the kernel runs for the exec, or one a loader was
    /// given: `role`), if anything; `given` is the name the caller called the program by.
    fn file_refusal(&self, f: &Target, how: &dyn Fn() -> String, given: &str) -> Option<Refusal> {
        let blocked = [f.name.as_str(), given]
            .into_iter()
            .find(|n| !n.is_empty() && self.rules.is_blocked(n));
        if let Some(n) = blocked {
            let msg = format!("`{n}`{} is on the blocklist; its exec was refused", how());
            return Some(refuse("blocklist", f, msg));
        }
        match self.identities.of(f) {
            Some(Known::Is(n, copy)) => {
                let what = match copy {
                    true => "a copy of",
                    false => "the same file as",
                };
                let msg = format!(
                    "{}{} is {what} `{n}`, which is on the blocklist; its exec was refused",
                    f.path().display(),
                    how()
                );
                return Some(refuse("blocklist", f, msg));
            }
            Some(Known::Unreadable(n)) => {
                let msg = format!(
                    "{}{} cannot be read by the daemon and is the size of `{n}`, which is on \
                     the blocklist: it cannot be told from a copy, so its exec was refused",
                    f.path().display(),
                    how()
                );
                return Some(refuse("blocklist", f, msg));
            }
            None => {}
        }
        let setid = libc::S_ISUID | libc::S_ISGID;
        if self.no_new_privs && f.mode & setid != 0 && f.is_regular() {
            let msg = format!(
                "`{}` is setuid or setgid and cannot gain privileges under exec checks \
                 (no_new_privs); ask the user to run it themselves, or to set exec_checks = \
                 \"off\" or run cubad with CAP_SYS_ADMIN",
                f.name
            );
            return Some(Refusal {
                errno: libc::EPERM,
                ..refuse("privileges", f, msg)
            });
        }
        if f.is_regular() && !f.readable {
            let msg = format!(
                "{}{} cannot be read by the daemon, so what it runs cannot be told (a copy of \
                 a blocked program, a script's interpreter); make it readable to run it",
                f.path().display(),
                how()
            );
            return Some(refuse("unreadable", f, msg));
        }
        None
    }

    /// `None`: nothing refuses the exec.
    fn refusal(&self, e: &Exec) -> Option<Refusal> {
        let t = e.target.as_ref()?;
        let given = file_name(Path::new(&e.path));
        for (i, f) in e.files().enumerate() {
            // Said only when refused: a file's path is read back from the kernel.
            let how = || match i {
                0 => String::new(),
                _ => format!(" (the interpreter of {})", t.path().display()),
            };
            let called = if i == 0 { given.as_str() } else { "" };
            if let Some(r) = self.file_refusal(f, &how, called) {
                return Some(r);
            }
        }
        // What a loader-like program was given runs without an exec of its own.
        for r in &e.runs {
            let how = || format!(" (given to {} to run)", t.name);
            if let Some(refusal) = self.file_refusal(&r.target, &how, "") {
                return Some(refusal);
            }
        }
        if e.runs_unknown {
            let msg = format!(
                "{} runs what its arguments name and was given more than the daemon reads; its \
                 exec was refused",
                t.name
            );
            return Some(refuse("unreadable", t, msg));
        }
        // A multi-call binary's tool (`busybox rm`), by the arguments of the image at the end.
        if let Some(applet) = self.applet(e).filter(|a| self.rules.is_blocked(a)) {
            let msg = format!(
                "`{applet}` (run by {}) is on the blocklist; its exec was refused",
                t.name
            );
            return Some(refuse("blocklist", t, msg));
        }
        if let Some(allowed) = &self.rules.allowed {
            let ok = allowed.contains(&t.name) || allowed.contains(&given);
            if !ok && self.shell_caller(e) {
                let msg = format!(
                    "`{given}` is not on the allowlist; allowed: {}",
                    allowed.iter().cloned().collect::<Vec<_>>().join(", ")
                );
                return Some(refuse("allowlist", t, msg));
            }
        }
        if !self.rules.dirs.is_empty() {
            let cwd = crate::platform::proc::cwd(e.pid as u32)?;
            if let Err(refusal) = self.rules.check_dir(&cwd) {
                return Some(refuse("allowed_dirs", t, refusal.message));
            }
        }
        None
    }

    /// The tool a multi-call image runs: the name it was called by, else its first argument
    /// (`busybox rm`), or coreutils' `--coreutils-prog=rm`.
    fn applet(&self, e: &Exec) -> Option<String> {
        let image = e.image()?;
        let name = self.multi_call(image)?;
        let argv = e.image_argv.as_ref().or(e.argv.as_ref())?;
        let called = file_name(Path::new(argv.first()?));
        if called != name && called != image.name {
            return Some(called);
        }
        let first = argv.get(1)?;
        if let Some(prog) = first.strip_prefix("--coreutils-prog=") {
            return Some(prog.to_string());
        }
        Some(file_name(Path::new(first)))
    }

    /// Whether the caller of `e` is a shell: known already (a check after an exec), else
    /// read once and kept with the exec.
    fn shell_caller(&self, e: &Exec) -> bool {
        if let Some(known) = e.shell_caller.get() {
            return known;
        }
        let shell = caller_is_shell(e.pid);
        e.shell_caller.set(Some(shell));
        shell
    }
}

/// Whether the caller of an exec is a shell (an allowlist governs what shells run, not what
/// the programs it allows run in turn: a compiler's own tools).
fn caller_is_shell(pid: i32) -> bool {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    SHELLS.contains(&file_name(&exe).as_str())
}

#[cfg(test)]
mod tests;
