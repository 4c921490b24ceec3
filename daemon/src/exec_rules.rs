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

pub use crate::platform::exec_check::{Exec, Refusal, Target, Verdict};
use crate::policy::{Effective, Policy};

/// Where a blocked name is looked for as a file when a policy is loaded, besides `PATH`.
const BIN_DIRS: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];
/// Policies whose blocked files are kept resolved.
const CACHED: usize = 16;
/// Shells whose execs an allowlist governs.
const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// The blocked names found as files: their identities, and sizes and hashes for copies.
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

impl Identities {
    /// Looks for every blocked name in `PATH` and the usual directories.
    fn resolve(policy: &Policy) -> Identities {
        let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        dirs.extend(BIN_DIRS.iter().map(PathBuf::from));
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
                if !policy.is_blocked(&name) {
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

    /// The blocked name `t` is, by identity or as a copy.
    fn of(&self, t: &Target) -> Option<(&str, bool)> {
        if let Some(name) = self.files.get(&(t.dev, t.ino)) {
            return Some((name, false));
        }
        let same_size = self.by_size.get(&t.size)?;
        if !t.readable {
            return None;
        }
        let h = hash_file(&t.file)?;
        same_size
            .iter()
            .find(|(x, _)| *x == h)
            .map(|(_, n)| (n.as_str(), true))
    }
}

/// Resolved identities per blocklist, shared by every process under the same one.
fn identities(policy: &Policy) -> Arc<Identities> {
    static CACHE: Mutex<Vec<(BTreeSet<String>, Arc<Identities>)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, ids)) = cache.iter().find(|(b, _)| *b == policy.blocked) {
        return ids.clone();
    }
    let ids = Arc::new(Identities::resolve(policy));
    if cache.len() >= CACHED {
        cache.remove(0);
    }
    cache.push((policy.blocked.clone(), ids.clone()));
    ids
}

/// What one tree's execs are held to.
pub struct ExecRules {
    rules: Policy,
    identities: Arc<Identities>,
    /// Setuid and setgid programs cannot gain privileges in the tree (`no_new_privs`).
    no_new_privs: bool,
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl ExecRules {
    pub fn new(policy: &Effective, no_new_privs: bool) -> ExecRules {
        let rules = policy.rules().clone();
        ExecRules {
            identities: identities(&rules),
            rules,
            no_new_privs,
        }
    }

    /// Resolves a policy's blocked files now (at a load), so the first exec does not pay.
    pub fn preload(policy: &Policy) {
        identities(policy);
    }

    /// Whether a program called `name` could match an `ask` pattern (its arguments are needed).
    pub fn wants_argv(&self, name: &str) -> bool {
        let name = name.rsplit('/').next().unwrap_or(name);
        self.rules.ask.command(name, &[None; 16]).is_some()
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

    /// The `ask` pattern the exec matches: its program (by real name, or the name it was
    /// called by) and arguments.
    fn ask(&self, e: &Exec) -> Option<String> {
        let t = e.target.as_ref()?;
        let argv = e.argv.as_ref()?;
        let args: Vec<Option<&str>> = argv.iter().skip(1).map(|a| Some(a.as_str())).collect();
        let given = file_name(Path::new(&e.path));
        let rule = [t.name.as_str(), given.as_str()]
            .into_iter()
            .find_map(|name| self.rules.ask.command(name, &args))
            .map(|pattern| format!("ask_commands: {pattern}"));
        rule
    }

    /// `None`: nothing refuses the exec.
    fn refusal(&self, e: &Exec) -> Option<Refusal> {
        let t = e.target.as_ref()?;
        let given = file_name(Path::new(&e.path));
        let refuse = |rule, program: &Target, message: String| Refusal {
            rule,
            program: program.path().display().to_string(),
            message,
            errno: libc::EACCES,
        };
        let files = e.files().map(|f| (f, None)).chain(
            // What the dynamic loader is given runs without an exec of its own.
            e.runs
                .iter()
                .map(|f| (f, Some("the program the loader was given"))),
        );
        for (i, (f, role)) in files.enumerate() {
            let how = match (i, role) {
                (_, Some(role)) => format!(" ({role}: {})", t.path().display()),
                (0, None) => String::new(),
                _ => format!(" (the interpreter of {})", t.path().display()),
            };
            let blocked = [f.name.as_str(), if i == 0 { given.as_str() } else { "" }]
                .into_iter()
                .find(|n| !n.is_empty() && self.rules.is_blocked(n));
            if let Some(n) = blocked {
                let msg = format!("`{n}`{how} is on the blocklist; its exec was refused");
                return Some(refuse("blocklist", f, msg));
            }
            if let Some((n, copy)) = self.identities.of(f) {
                let what = match copy {
                    true => "a copy of",
                    false => "the same file as",
                };
                let msg = format!(
                    "{}{how} is {what} `{n}`, which is on the blocklist; its exec was refused",
                    f.path().display()
                );
                return Some(refuse("blocklist", f, msg));
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
        }
        // A multi-call binary's tool (`busybox rm`), or a loader's program known by name only.
        if let Some(applet) = e.applet.as_deref().filter(|a| self.rules.is_blocked(a)) {
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
