//! One notification: receiving it, reading the exec's path and arguments out of the caller's
//! memory, finding the file the kernel will run (links, `#!` interpreters) and answering.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

use super::filter;
use super::types::{Exec, Target};

const AT_EMPTY_PATH: u64 = 0x1000;
/// `#!` nesting the kernel follows (BINPRM_MAX_RECURSION).
const MAX_INTERPRETERS: usize = 4;
/// Arguments read for a report, and the bytes of each.
const MAX_ARGS: usize = 16;
const MAX_ARG_BYTES: usize = 256;
const PAGE: usize = 4096;

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

/// Answers `id`: the exec goes on (`None`) or fails with `errno`.
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
        // Page by page: a read that crosses into an unmapped page fails as a whole.
        let room = (PAGE - (at as usize % PAGE)).min(max - out.len());
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

    /// The first arguments, shortened (for a report).
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

    /// What the exec would run, as the caller's kernel sees it. `None` when its path cannot be
    /// read from the caller's memory.
    pub fn exec(&self) -> Option<Exec> {
        let given = self.path()?;
        let dirfd = self.args[0] as i32;
        let pid = self.pid;
        let open_at = if given.first() == Some(&b'/') {
            PathBuf::from(OsStr::from_bytes(&given))
        } else {
            let base = match self.execveat() && dirfd != libc::AT_FDCWD {
                true => format!("/proc/{pid}/fd/{dirfd}"),
                false => format!("/proc/{pid}/cwd"),
            };
            let empty = given.is_empty() && self.execveat() && self.args[4] & AT_EMPTY_PATH != 0;
            match empty {
                true => PathBuf::from(base),
                false => PathBuf::from(base).join(OsStr::from_bytes(&given)),
            }
        };
        let mut exec = Exec {
            pid,
            path: String::from_utf8_lossy(&given).into_owned(),
            target: target(&open_at),
            interpreters: Vec::new(),
            shared_memory: shares_memory(pid),
        };
        // `#!` lines, as the kernel follows them (it execs the interpreter without asking).
        let mut script = exec.target.as_ref().and_then(interpreter);
        while let Some(path) = script.take() {
            if exec.interpreters.len() >= MAX_INTERPRETERS {
                break;
            }
            let at = match path.is_absolute() {
                true => path,
                false => PathBuf::from(format!("/proc/{pid}/cwd")).join(path),
            };
            let Some(t) = target(&at) else { break };
            script = interpreter(&t);
            exec.interpreters.push(t);
        }
        Some(exec)
    }
}

/// The file at `path` (links followed), opened for reading where it may be (else as a path).
pub fn target(path: &std::path::Path) -> Option<Target> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map(|f| (f, true))
        .or_else(|_| {
            let c =
                std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
            // SAFETY: a NUL-terminated path; the descriptor is owned by the File.
            let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
            match fd {
                -1 => Err(io::Error::last_os_error()),
                // SAFETY: a new descriptor that nothing else owns.
                fd => Ok((unsafe { File::from_raw_fd(fd) }, false)),
            }
        })
        .ok()?;
    let (file, readable) = file;
    let meta = file.metadata().ok()?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .unwrap_or_else(|_| path.to_path_buf());
    Some(Target {
        path: real,
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mode: meta.mode(),
        file: readable.then_some(file),
    })
}

/// The interpreter a `#!` line of `t` names.
fn interpreter(t: &Target) -> Option<PathBuf> {
    let file = t.file.as_ref()?;
    if t.mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let mut head = [0u8; 256];
    let n = file.read_at(&mut head, 0).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let name = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())?;
    Some(PathBuf::from(OsStr::from_bytes(name)))
}

/// Fields 4 (ppid) and 20 (threads) of `/proc/PID/stat`.
fn ppid_and_threads(pid: i32) -> Option<(i32, u64)> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may hold anything: count from its end.
    let after = stat.iter().rposition(|&b| b == b')')? + 2;
    let fields: Vec<&[u8]> = stat[after..].split(|&b| b == b' ').collect();
    let num = |i: usize| {
        std::str::from_utf8(fields.get(i)?)
            .ok()?
            .parse::<i64>()
            .ok()
    };
    Some((num(1)? as i32, num(17)? as u64))
}

/// Whether another thread can write the caller's memory while the exec goes on: it has more
/// than one thread, or it is a vfork child of a process that has.
fn shares_memory(pid: i32) -> bool {
    let Some((ppid, threads)) = ppid_and_threads(pid) else {
        return true;
    };
    if threads > 1 {
        return true;
    }
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp compares two processes' kernel objects; integer arguments only.
    let same = unsafe { libc::syscall(libc::SYS_kcmp, pid, ppid, KCMP_VM, 0, 0) } == 0;
    same && ppid_and_threads(ppid).is_none_or(|(_, t)| t > 1)
}

/// The program process `pid` runs now, for the check after an exec that could have changed.
pub fn running(pid: i32) -> Option<Target> {
    target(&PathBuf::from(format!("/proc/{pid}/exe")))
}
