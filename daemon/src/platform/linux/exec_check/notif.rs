//! One notification: receiving it, reading the exec's path and arguments out of the caller's
//! memory, finding the file the kernel will run (links, `#!` interpreters) and answering.
//! Every system call here is on the path of a waiting exec: each is counted.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::filter;
use super::types::{Exec, Target};

const AT_EMPTY_PATH: u64 = 0x1000;
/// `#!` nesting the kernel follows (BINPRM_MAX_RECURSION).
const MAX_INTERPRETERS: usize = 4;
/// Arguments read for a report, and the bytes of each.
const MAX_ARGS: usize = 16;
const MAX_ARG_BYTES: usize = 256;
const PAGE: usize = 4096;
/// Bytes of a string read at first.
const FIRST_READ: usize = 256;
/// Programs that run one of many tools named by their first argument or the name they are
/// called by, without an exec of their own.
const MULTI_CALL: [&str; 3] = ["busybox", "toybox", "coreutils"];
/// Options of the dynamic loader that take a value (before the program it is to run).
const LOADER_VALUES: [&str; 7] = [
    "--library-path",
    "--inhibit-rpath",
    "--audit",
    "--preload",
    "--argv0",
    "--glibc-hwcaps-prepend",
    "--glibc-hwcaps-mask",
];

pub struct Notification {
    pub id: u64,
    pub pid: i32,
    arch: u32,
    nr: i32,
    args: [u64; 6],
}

/// Receives the pending notification of `listener` (call when it is readable).
pub fn recv(listener: RawFd) -> io::Result<Notification> {
    // SAFETY: a zeroed seccomp_notif is what the kernel requires as input.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is a valid seccomp_notif for the kernel to fill.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut n) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notification {
        id: n.id,
        pid: n.pid as i32,
        arch: n.data.arch,
        nr: n.data.nr,
        args: n.data.args,
    })
}

/// Whether notification `id` is still waiting (its caller did not die and its pid was not
/// reused since it was received): what was read from `/proc/PID` was that caller's.
pub fn still_valid(listener: RawFd, id: u64) -> bool {
    // SAFETY: the ioctl reads the u64.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &id) == 0 }
}

/// Asks the kernel to wake the checker on the caller's CPU and the caller on the checker's, or
/// not (Linux 6.6; older kernels refuse the flag and nothing else changes).
pub fn sync_wake_up(listener: RawFd, on: bool) {
    /// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`.
    const SYNC_WAKE_UP: libc::c_ulong = 1;
    let flags: libc::c_ulong = if on { SYNC_WAKE_UP } else { 0 };
    // SAFETY: the flags are passed by value.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _, flags) };
}

/// Answers `id`: the exec goes on (`None`) or fails with `errno`. An error: the caller is
/// gone (or was interrupted), and nothing was decided for it.
pub fn answer(listener: RawFd, id: u64, refuse: Option<i32>) -> io::Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: refuse.map_or(0, |e| -e),
        flags: match refuse {
            None => libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            Some(_) => 0,
        },
    };
    // SAFETY: `resp` is a valid seccomp_notif_resp.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &resp) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads `buf.len()` bytes at `addr` of process `pid`; the count read.
fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> usize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: both iovecs describe valid lengths; the local one is our buffer.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    n.max(0) as usize
}

/// The NUL-terminated string at `addr`, at most `max` bytes; `None` if it cannot be read.
fn read_cstr(pid: i32, addr: u64, max: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        // Page by page: a read that crosses into an unmapped page fails as a whole. The first
        // read is short: most paths fit, and a read costs by its size.
        let room = (PAGE - (at as usize % PAGE)).min(max - out.len());
        let room = match out.is_empty() {
            true => room.min(FIRST_READ),
            false => room,
        };
        let mut chunk = [0u8; PAGE];
        let got = read_mem(pid, at, &mut chunk[..room]);
        if got == 0 {
            return None;
        }
        if let Some(end) = chunk[..got].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Some(out);
        }
        out.extend_from_slice(&chunk[..got]);
        at += got as u64;
    }
    Some(out)
}

impl Notification {
    fn execveat(&self) -> bool {
        filter::is_execveat(self.arch, self.nr)
    }

    fn word(&self) -> usize {
        if filter::is_compat(self.arch) {
            4
        } else {
            8
        }
    }

    /// The program's path as the caller gave it.
    fn path(&self) -> Option<Vec<u8>> {
        let addr = if self.execveat() {
            self.args[1]
        } else {
            self.args[0]
        };
        read_cstr(self.pid, addr, libc::PATH_MAX as usize)
    }

    /// The first arguments, shortened (for a report, and for the programs whose arguments
    /// name what they run).
    pub fn argv(&self) -> Vec<String> {
        let base = if self.execveat() {
            self.args[2]
        } else {
            self.args[1]
        };
        let w = self.word();
        let mut out = Vec::new();
        for i in 0..MAX_ARGS {
            let mut ptr = [0u8; 8];
            if read_mem(self.pid, base + (i * w) as u64, &mut ptr[..w]) < w {
                break;
            }
            let addr = match w {
                4 => u32::from_ne_bytes([ptr[0], ptr[1], ptr[2], ptr[3]]) as u64,
                _ => u64::from_ne_bytes(ptr),
            };
            if addr == 0 {
                break;
            }
            match read_cstr(self.pid, addr, MAX_ARG_BYTES) {
                Some(a) => out.push(String::from_utf8_lossy(&a).into_owned()),
                None => break,
            }
        }
        out
    }

    /// What the exec would run, as the caller's kernel sees it, with its arguments where
    /// `wants` says the rules need them for a program of that name. `None` when its path
    /// cannot be read from the caller's memory.
    pub fn exec(&self, wants: &dyn Fn(&str) -> bool) -> Option<Exec> {
        let given = self.path()?;
        let dirfd = self.args[0] as i32;
        let pid = self.pid;
        let cwd = || PathBuf::from(format!("/proc/{pid}/cwd"));
        let open_at = if given.first() == Some(&b'/') {
            PathBuf::from(OsStr::from_bytes(&given))
        } else {
            let base = match self.execveat() && dirfd != libc::AT_FDCWD {
                true => PathBuf::from(format!("/proc/{pid}/fd/{dirfd}")),
                false => cwd(),
            };
            let empty = given.is_empty() && self.execveat() && self.args[4] & AT_EMPTY_PATH != 0;
            match empty {
                true => base,
                false => base.join(OsStr::from_bytes(&given)),
            }
        };
        let mut exec = Exec {
            pid,
            path: String::from_utf8_lossy(&given).into_owned(),
            target: target(&open_at),
            ..Exec::default()
        };
        // `#!` lines, as the kernel follows them (it execs the interpreter without asking).
        let mut script = exec.target.as_ref().and_then(interpreter);
        while let Some(path) = script.take() {
            if exec.interpreters.len() >= MAX_INTERPRETERS {
                break;
            }
            let at = match path.is_absolute() {
                true => path,
                false => cwd().join(path),
            };
            let Some(t) = target(&at) else { break };
            script = interpreter(&t);
            exec.interpreters.push(t);
        }
        let named = |n: &str| wants(n);
        let asked = named(base_name(&exec.path)) || exec.files().any(|t| named(&t.name));
        if asked {
            exec.argv = Some(self.argv());
        }
        // Programs that run another without an exec: what their arguments name.
        let last = exec.files().last().map(|t| t.name.clone());
        if let Some(name) = last {
            if is_loader(&name) {
                let argv = exec.argv.get_or_insert_with(|| self.argv()).clone();
                if let Some(program) = loader_program(&argv) {
                    let at = match program.starts_with('/') {
                        true => PathBuf::from(program),
                        false => cwd().join(program),
                    };
                    exec.runs.extend(target(&at));
                    if exec.runs.is_empty() {
                        exec.applet = Some(base_name(program).to_string());
                    }
                }
            } else if MULTI_CALL.contains(&name.as_str()) {
                let argv = exec.argv.get_or_insert_with(|| self.argv());
                exec.applet = applet(&name, argv);
            }
        }
        Some(exec)
    }
}

fn base_name(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// The dynamic loader (`ld-linux-x86-64.so.2`, `ld.so`, `ld-musl-x86_64.so.1`), which runs
/// the program it is given by mapping it, not by an exec.
fn is_loader(name: &str) -> bool {
    name.starts_with("ld-linux") || name.starts_with("ld-musl") || name.starts_with("ld.so")
}

/// The program a loader's arguments name: the first that is not an option or its value.
fn loader_program(argv: &[String]) -> Option<&str> {
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        if a == "--" {
            return args.next().map(String::as_str);
        }
        if LOADER_VALUES.contains(&a.as_str()) {
            args.next();
            continue;
        }
        if a.starts_with("--") {
            continue;
        }
        return Some(a);
    }
    None
}

/// The tool a multi-call binary called `name` runs: the name it was called by, else its first
/// argument (`busybox rm`), or coreutils' `--coreutils-prog=rm`.
fn applet(name: &str, argv: &[String]) -> Option<String> {
    let called = base_name(argv.first()?);
    if called != name {
        return Some(called.to_string());
    }
    let first = argv.get(1)?;
    if let Some(prog) = first.strip_prefix("--coreutils-prog=") {
        return Some(prog.to_string());
    }
    Some(base_name(first).to_string())
}

fn c_path(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

fn open_raw(path: &CString, flags: i32) -> io::Result<File> {
    // SAFETY: a NUL-terminated path; the descriptor is owned by the File at once.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// The file at `path` as an exec of it would find it (links followed).
///
/// The common case costs a `statx` and an open: a regular file whose last component is not a
/// link is opened for reading without following links, and its name is that component. A
/// link is followed and its name read back from the descriptor; anything that is not a
/// regular file is opened as a path only, so that opening it has no effect of its own (a
/// device's open can do things).
pub fn target(path: &Path) -> Option<Target> {
    let c = c_path(path)?;
    let before = std::fs::symlink_metadata(path).ok()?;
    let kind = before.mode() & libc::S_IFMT;
    let read_flags = libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK;
    if kind == libc::S_IFREG {
        // What the look found is what the checks use: a file swapped in after it is not what
        // the kernel will read either, and the check after the exec is for that.
        let found = |file, readable| Target {
            name: base_of(path),
            opened: path.to_path_buf(),
            dev: before.dev(),
            ino: before.ino(),
            size: before.size(),
            mode: before.mode(),
            readable,
            file,
        };
        match open_raw(&c, read_flags | libc::O_NOFOLLOW) {
            Ok(file) => return Some(found(file, true)),
            // Readable by nobody but the kernel's exec (mode --x): a path will do.
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                let file = open_raw(&c, libc::O_PATH | libc::O_NOFOLLOW).ok()?;
                return Some(found(file, false));
            }
            // Replaced since the look (by a link, say): resolved the slow way below.
            Err(_) => {}
        }
    }
    // A link (or a magic link of /proc): followed, and the name read back.
    let file = open_raw(&c, libc::O_PATH).ok()?;
    let meta = file.metadata().ok()?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd;
        file.as_raw_fd()
    }))
    .ok();
    let name = real.as_deref().map_or_else(|| base_of(path), base_of);
    if meta.mode() & libc::S_IFMT == libc::S_IFREG {
        // Readable where it may be: a `#!` line or a copy's content is read from it.
        if let Some(readable) = real
            .as_ref()
            .and_then(|r| c_path(r))
            .and_then(|r| open_raw(&r, read_flags | libc::O_NOFOLLOW).ok())
        {
            let same = readable
                .metadata()
                .is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino()));
            if same {
                return finish(readable, true, name, path);
            }
        }
    }
    finish(file, false, name, path)
}

fn base_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn finish(file: File, readable: bool, name: String, path: &Path) -> Option<Target> {
    let meta = file.metadata().ok()?;
    Some(Target {
        name,
        opened: path.to_path_buf(),
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mode: meta.mode(),
        readable: readable && meta.mode() & libc::S_IFMT == libc::S_IFREG,
        file,
    })
}

/// The interpreter a `#!` line of `t` names.
fn interpreter(t: &Target) -> Option<PathBuf> {
    if !t.readable || t.size < 3 {
        return None;
    }
    let mut head = [0u8; 256];
    let n = t.file.read_at(&mut head, 0).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let name = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())?;
    Some(PathBuf::from(OsStr::from_bytes(name)))
}

/// What process `pid` runs now: the device and inode of its program (one `statx` of
/// `/proc/PID/exe`, which the kernel resolves to the file itself). `None`: it has ended.
pub fn running_id(pid: i32) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The program process `pid` runs now, opened, for the rules.
pub fn running(pid: i32) -> Option<Target> {
    target(&PathBuf::from(format!("/proc/{pid}/exe")))
}

/// The arguments process `pid` runs with now (for the report of a program killed after its
/// exec), shortened as a notification's are.
pub fn cmdline(pid: i32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .take(MAX_ARGS)
        .map(|a| String::from_utf8_lossy(&a[..a.len().min(MAX_ARG_BYTES)]).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_followed_and_named_by_what_it_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::write(&real, b"#!/bin/sh\n").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let t = target(&link).expect("target");
        assert_eq!(t.name, "real");
        assert!(t.readable);
        assert_eq!(t.path(), real.canonicalize().expect("canonical"));
        let direct = target(&real).expect("target");
        assert_eq!((direct.name.as_str(), direct.id()), ("real", t.id()));
        assert_eq!(interpreter(&direct), Some(PathBuf::from("/bin/sh")));
    }

    #[test]
    fn a_device_is_not_opened_for_reading() {
        let t = target(Path::new("/dev/null")).expect("target");
        assert!(!t.readable);
        assert_eq!(t.name, "null");
        assert!(target(Path::new("/nonexistent/x")).is_none());
    }

    #[test]
    fn what_a_loader_and_a_multi_call_binary_run() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let argv = v(&[
            "ld.so",
            "--library-path",
            "/lib",
            "--inhibit-cache",
            "/bin/rm",
            "-f",
        ]);
        assert_eq!(loader_program(&argv), Some("/bin/rm"));
        assert_eq!(loader_program(&v(&["ld.so", "--", "rm"])), Some("rm"));
        assert_eq!(loader_program(&v(&["ld.so", "--list"])), None);
        assert!(is_loader("ld-linux-x86-64.so.2"));
        assert_eq!(
            applet("busybox", &v(&["busybox", "rm", "-rf"])).as_deref(),
            Some("rm")
        );
        assert_eq!(applet("busybox", &v(&["rm", "-rf"])).as_deref(), Some("rm"));
        let c = v(&["coreutils", "--coreutils-prog=rm", "x"]);
        assert_eq!(applet("coreutils", &c).as_deref(), Some("rm"));
    }

    #[test]
    fn what_a_process_runs_is_read_from_its_exe() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id() as i32;
        // Its arguments are there once the kernel has built the new image's stack, a moment
        // after the spawn has returned.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while cmdline(pid).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let (id, t, args) = (running_id(pid), running(pid), cmdline(pid));
        let _ = child.kill();
        let _ = child.wait();
        let t = t.expect("running");
        assert_eq!(id, Some(t.id()));
        assert!(t.name.starts_with("sleep") || t.name == "coreutils" || t.name == "busybox");
        assert_eq!(args, ["sleep", "30"]);
    }
}
