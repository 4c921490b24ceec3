//! What one exec would run, as the kernel would run it for its caller: the file its path names
//! (`resolve.rs`), then each interpreter the kernel runs without another exec — `#!` lines,
//! five deep, and the `PT_INTERP` of the ELF image at the end — and, when that image is a
//! dynamic loader (or built like one), every file its arguments name. A path that names no
//! file is the error the kernel would give; a caller the daemon cannot see into is unreadable.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::image::{self, Shebang};
use super::notif::{Notification, MAX_ARGS, MAX_ARG_BYTES};
use super::resolve::{self, Base, Caller, Found};
use super::types::{Exec, Run, Target};

const AT_EMPTY_PATH: u64 = 0x1000;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
/// Interpreters the kernel follows before it gives up (`exec_binprm`: `depth > 5`).
const MAX_INTERPRETERS: usize = 5;

/// Why no `Exec` was made.
#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    /// The daemon could not read what the call names (the caller's memory or its `/proc`).
    Unreadable,
    /// The exec fails with this error whatever is decided: the daemon answers it.
    Fails(i32),
}

/// A target of the file `found` (named `opened` when shown).
fn target_of(found: Found, opened: PathBuf) -> Option<Target> {
    let Found { fd, name } = found;
    // SAFETY: fstat fills the zeroed buffer for a descriptor we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd), &mut st) } != 0 {
        return None;
    }
    let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    let readable = regular.then(|| resolve::reopen(&fd)).flatten();
    let (file, readable) = match readable {
        Some(f) => (f, true),
        None => (File::from(fd), false),
    };
    Some(Target {
        name: OsStr::from_bytes(&name).to_string_lossy().into_owned(),
        opened,
        dev: st.st_dev,
        ino: st.st_ino,
        size: st.st_size as u64,
        mode: st.st_mode,
        readable,
        file,
    })
}

/// The file at `path` in the daemon's own view (links followed): for what the daemon names
/// itself (`/proc/PID/exe`) and for tests.
pub fn target(path: &Path) -> Option<Target> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .ok()?;
    let fd: OwnedFd = file.into();
    let name = resolve::name_of(&fd).unwrap_or_default();
    target_of(Found { fd, name }, path.to_path_buf())
}

/// The program process `pid` runs now, opened, for the rules.
pub fn running(pid: i32) -> Option<Target> {
    target(&PathBuf::from(format!("/proc/{pid}/exe")))
}

/// The first bytes of a readable target: what the kernel reads to choose its handler, and
/// enough for an ELF image's headers and interpreter in one read, as a linker lays them out.
fn head(t: &Target) -> Vec<u8> {
    if !t.readable {
        return Vec::new();
    }
    let mut buf = vec![0u8; image::FIRST_READ];
    let n = t.file.read_at(&mut buf, 0).unwrap_or(0);
    buf.truncate(n);
    buf
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The interpreter's part of the arguments the kernel builds for a `#!` file: `name [arg]
/// file`, before the caller's own arguments after its first.
struct Splice {
    name: Vec<u8>,
    arg: Option<Vec<u8>>,
    /// The path the kernel passes for the file (the caller's path, `/dev/fd/N/…` for an
    /// `execveat` descriptor, or the previous interpreter).
    file: Vec<u8>,
}

/// What `n` would run. `wants` says, of a file, whether the rules need the call's arguments
/// (an `ask` pattern names it, or it runs the tool it is called as).
pub fn inspect(
    n: &Notification,
    wants: &dyn Fn(&Target) -> bool,
    view: &mut View,
) -> Result<Exec, Miss> {
    let given = n.path().ok_or(Miss::Unreadable)?;
    let View { root, interps } = view;
    let c = &n.caller(root.as_ref());
    let (dirfd, flags) = n.dir_and_flags();
    let at_dir = dirfd != libc::AT_FDCWD;
    let found = if given.is_empty() && flags & AT_EMPTY_PATH != 0 && n.execveat() {
        resolve::open_of(c, &format!("fd/{dirfd}")).map(|fd| Found {
            name: resolve::name_of(&fd).unwrap_or_default(),
            fd,
        })
    } else {
        let base = if at_dir { Base::Dir(dirfd) } else { Base::Cwd };
        let follow = flags & AT_SYMLINK_NOFOLLOW == 0;
        resolve::find(c, base, &given, follow)
    };
    let found = found.map_err(miss)?;
    // The path the kernel hands an interpreter for this file (`bprm->filename`).
    let mut file_path = match (at_dir, given.first()) {
        (true, Some(b'/')) | (false, _) => given.clone(),
        (true, None) => format!("/dev/fd/{dirfd}").into_bytes(),
        (true, Some(_)) => [format!("/dev/fd/{dirfd}/").as_bytes(), &given].concat(),
    };
    let target =
        target_of(found, PathBuf::from(OsStr::from_bytes(&given))).ok_or(Miss::Unreadable)?;
    let mut exec = Exec {
        pid: n.pid,
        path: lossy(&given),
        ..Exec::default()
    };
    // `#!` lines, as the kernel follows them (it runs each interpreter without asking).
    let mut splices = Vec::new();
    let mut last = head(&target);
    exec.target = Some(target);
    while let Some(Shebang { name, arg }) = image::shebang(&last) {
        if exec.interpreters.len() >= MAX_INTERPRETERS {
            return Err(Miss::Fails(libc::ELOOP));
        }
        let t = interpreter(c, &name)?;
        last = head(&t);
        splices.push(Splice {
            name: name.clone(),
            arg,
            file: std::mem::replace(&mut file_path, name),
        });
        exec.interpreters.push(t);
    }
    // The ELF image at the end: its interpreter is mapped by the kernel, unasked.
    let elf = exec.image().and_then(|t| image::elf(&t.file, &last));
    let loader_like = elf.as_ref().is_some_and(|e| e.loader_like);
    if let Some(interp) = elf.and_then(|e| e.interp) {
        exec.elf_interpreter = Some(elf_interpreter(interps, c, &interp)?);
    }
    if exec.files().any(wants) {
        exec.argv = Some(n.argv());
        if !splices.is_empty() {
            let whole = n.argv().into_iter().map(String::into_bytes).collect();
            let built = built_argv(whole, &splices);
            exec.image_argv = Some(built.iter().map(|a| lossy(a)).collect());
        }
    }
    if loader_like {
        match n.argv_whole() {
            Some(args) => exec.runs = loader_runs(c, built_argv(args, &splices)),
            None => exec.runs_unknown = true,
        }
    }
    Ok(exec)
}

/// What the checker knows of its callers' view across execs: their root, where no command may
/// change its own (namespaces refused: no `chroot`, `pivot_root`, `setns` or mount), and the
/// ELF interpreters found lately there (the dynamic loader, named by nearly every program).
pub struct View {
    root: Option<OwnedFd>,
    interps: Interps,
}

/// How long an interpreter found is used before it is looked for again.
const INTERP_FOR: Duration = Duration::from_secs(1);
/// Interpreters kept (a machine has one or two).
const INTERPS: usize = 8;

impl View {
    /// The callers' root, where it is the daemon's own.
    pub fn root(&self) -> Option<&OwnedFd> {
        self.root.as_ref()
    }

    /// `same_root`: every caller's root is the daemon's own.
    pub fn new(same_root: bool) -> View {
        let root = same_root
            .then(|| {
                File::options()
                    .read(true)
                    .custom_flags(libc::O_PATH)
                    .open("/")
            })
            .and_then(Result::ok)
            .map(OwnedFd::from);
        View {
            root,
            interps: Vec::new(),
        }
    }
}

/// Interpreters found lately, by the name they were found by.
type Interps = Vec<(Vec<u8>, Instant, Arc<Target>)>;

/// The ELF interpreter `name`, from the callers' shared root: the one found lately while it is
/// still there (not replaced: its link count above 0) and not a second old.
fn elf_interpreter(
    interps: &mut Interps,
    c: &Caller<'_>,
    name: &[u8],
) -> Result<Arc<Target>, Miss> {
    if !c.known_root() {
        return interpreter(c, name).map(Arc::new);
    }
    let now = Instant::now();
    if let Some(i) = interps.iter().position(|(n, _, _)| n == name) {
        let (_, at, t) = &interps[i];
        let linked = t.file.metadata().is_ok_and(|m| m.nlink() > 0);
        if linked && now.duration_since(*at) < INTERP_FOR {
            return Ok(t.clone());
        }
        interps.remove(i);
    }
    let t = Arc::new(interpreter(c, name)?);
    if interps.len() >= INTERPS {
        interps.remove(0);
    }
    interps.push((name.to_vec(), now, t.clone()));
    Ok(t)
}

fn miss(e: resolve::Miss) -> Miss {
    match e {
        resolve::Miss::Errno(e) => Miss::Fails(e),
        resolve::Miss::NoView => Miss::Unreadable,
    }
}

/// An interpreter the kernel opens by `name` for the caller (as `open_exec` does: from its
/// working directory when relative); one that cannot be found fails the exec.
fn interpreter(c: &Caller<'_>, name: &[u8]) -> Result<Target, Miss> {
    let found = resolve::find(c, Base::Cwd, name, true).map_err(miss)?;
    target_of(found, PathBuf::from(OsStr::from_bytes(name))).ok_or(Miss::Unreadable)
}

/// The arguments the image at the end of the `#!` chain gets: for each script, the kernel
/// drops the first argument and puts the interpreter, its argument and the file in front.
fn built_argv(mut argv: Vec<Vec<u8>>, splices: &[Splice]) -> Vec<Vec<u8>> {
    for s in splices {
        if !argv.is_empty() {
            argv.remove(0);
        }
        let mut front = vec![s.name.clone()];
        front.extend(s.arg.clone());
        front.push(s.file.clone());
        argv.splice(0..0, front);
    }
    argv
}

/// What a loader-like image may run without an exec: every file its arguments name (the
/// program it is given is one of them, whatever options come before), each with the
/// arguments after it.
fn loader_runs(c: &Caller<'_>, argv: Vec<Vec<u8>>) -> Vec<Run> {
    let mut runs = Vec::new();
    for (i, arg) in argv.iter().enumerate().skip(1) {
        if arg.is_empty() {
            continue;
        }
        let Ok(found) = resolve::find(c, Base::Cwd, arg, true) else {
            continue;
        };
        let Some(t) = target_of(found, PathBuf::from(OsStr::from_bytes(arg))) else {
            continue;
        };
        if !t.is_regular() {
            continue;
        }
        let rest = argv[i..]
            .iter()
            .take(MAX_ARGS)
            .map(|a| lossy(&a[..a.len().min(MAX_ARG_BYTES)]))
            .collect();
        runs.push(Run {
            target: t,
            argv: rest,
        });
    }
    runs
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn v(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_script_chain_builds_the_arguments_the_kernel_builds() {
        let one = Splice {
            name: b"/lib64/ld.so".to_vec(),
            arg: Some(b"--argv0".to_vec()),
            file: b"./x".to_vec(),
        };
        assert_eq!(
            built_argv(v(&["x", "/bin/rm", "f"]), &[one]),
            v(&["/lib64/ld.so", "--argv0", "./x", "/bin/rm", "f"])
        );
        let inner = Splice {
            name: b"/opt/wrap".to_vec(),
            arg: None,
            file: b"/tmp/s".to_vec(),
        };
        let outer = Splice {
            name: b"/bin/sh".to_vec(),
            arg: Some(b"-e".to_vec()),
            file: b"/opt/wrap".to_vec(),
        };
        assert_eq!(
            built_argv(v(&["s", "a"]), &[inner, outer]),
            v(&["/bin/sh", "-e", "/opt/wrap", "/tmp/s", "a"])
        );
    }
}
