//! One notification: receiving it, reading the exec's path and arguments (or a socket call's
//! arguments) out of the caller's memory, and answering. Every system call here is on the path
//! of a waiting call: each is counted. What the exec would run is found from it by
//! `inspect.rs`; a socket call is made by `sockets.rs`.

use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use super::calls::{self, SocketCall};

/// Arguments read for a report, and the bytes of each.
pub const MAX_ARGS: usize = 16;
pub const MAX_ARG_BYTES: usize = 256;
/// Arguments read whole at most, for a program whose arguments decide what it runs.
const MAX_WHOLE_ARGS: usize = 4096;
const PAGE: usize = 4096;
/// Bytes of a string read at first.
const FIRST_READ: usize = 256;

pub struct Notification {
    pub id: u64,
    pub pid: i32,
    arch: u32,
    nr: i32,
    args: [u64; 6],
    /// Whose memory holds the call's strings: the caller's, or the daemon's own for its own
    /// child's first exec (see [`Notification::daemons_own`]).
    mem_pid: i32,
    /// The daemon's own child's first exec: it runs in this directory, in the daemon's view.
    own: Option<PathBuf>,
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
        mem_pid: n.pid as i32,
        own: None,
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

/// Answers `id` with a result of the daemon's own, the call made in its place: 0, or
/// `-errno`. Never lets the caller's call go on. An error: the caller is gone.
pub fn reply(listener: RawFd, id: u64, result: Result<(), i32>) -> io::Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: result.err().map_or(0, |e| -e),
        flags: 0,
    };
    // SAFETY: `resp` is a valid seccomp_notif_resp.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &resp) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
        let got = crate::platform::proc::read_memory(pid, at, &mut chunk[..room]);
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
    /// This is the first exec of a child the daemon itself started in `cwd`, which still runs
    /// the daemon's code in the daemon's memory (or a copy of it): what it names is read
    /// there and found in the daemon's view, as the daemon's own `/proc` entries are closed to
    /// itself through the child (not dumpable).
    pub fn daemons_own(&mut self, cwd: PathBuf) {
        self.mem_pid = std::process::id() as i32;
        self.own = Some(cwd);
    }

    /// Who makes the call, as the resolver looks at it; `root`: its root directory where it
    /// is known without a look (the daemon's, where no command may change its own).
    pub fn caller<'a>(&self, root: Option<&'a std::os::fd::OwnedFd>) -> super::resolve::Caller<'a> {
        super::resolve::Caller::new(self.pid, self.own.clone(), root)
    }

    /// Whether this is an exec (else a namespace or mount call, where those are refused).
    pub fn is_exec(&self) -> bool {
        calls::is_exec(self.arch, self.nr)
    }

    /// Whether this is a socket's `connect` or `bind` (a tree with a Unix socket rule).
    pub fn socket_call(&self) -> Option<SocketCall> {
        calls::socket_call(self.arch, self.nr)
    }

    /// A socket call's arguments: the descriptor, the address's place and its length.
    pub fn socket_args(&self) -> (i32, u64, u32) {
        let addr = match calls::is_compat(self.arch) {
            true => self.args[1] & u64::from(u32::MAX),
            false => self.args[1],
        };
        (self.args[0] as i32, addr, self.args[2] as u32)
    }

    /// Reads the caller's memory at `addr` into `buf`: the bytes read.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
        crate::platform::proc::read_memory(self.mem_pid, addr, buf)
    }

    /// The name of the namespace or mount call this is, for a report.
    pub fn call_name(&self) -> &'static str {
        calls::call_name(self.arch, self.nr)
    }

    pub fn execveat(&self) -> bool {
        calls::is_execveat(self.arch, self.nr)
    }

    fn word(&self) -> usize {
        if calls::is_compat(self.arch) {
            4
        } else {
            8
        }
    }

    /// `execveat`'s directory descriptor and flags (`AT_FDCWD` and none for `execve`).
    pub fn dir_and_flags(&self) -> (i32, u64) {
        match self.execveat() {
            true => (self.args[0] as i32, self.args[4]),
            false => (libc::AT_FDCWD, 0),
        }
    }

    /// The program's path as the caller gave it.
    pub fn path(&self) -> Option<Vec<u8>> {
        let addr = if self.execveat() {
            self.args[1]
        } else {
            self.args[0]
        };
        read_cstr(self.mem_pid, addr, libc::PATH_MAX as usize)
    }

    /// The first arguments, shortened (for a report, and for the programs whose arguments
    /// name what they run).
    pub fn argv(&self) -> Vec<String> {
        self.args_read(MAX_ARGS, MAX_ARG_BYTES)
            .into_iter()
            .map(|a| String::from_utf8_lossy(&a).into_owned())
            .collect()
    }

    /// Every argument, whole, for a program whose arguments decide what it runs (the dynamic
    /// loader); `None` when there are more than the checks read (or one cannot be read).
    pub fn argv_whole(&self) -> Option<Vec<Vec<u8>>> {
        let args = self.args_read(MAX_WHOLE_ARGS + 1, libc::PATH_MAX as usize + 1);
        let whole = args.len() <= MAX_WHOLE_ARGS
            && args.iter().all(|a| a.len() <= libc::PATH_MAX as usize)
            && self.argc_at_most(args.len());
        whole.then_some(args)
    }

    /// Whether the argument vector ends after `n` entries (its pointer there is NULL).
    fn argc_at_most(&self, n: usize) -> bool {
        let w = self.word();
        let mut ptr = [0u8; 8];
        crate::platform::proc::read_memory(
            self.mem_pid,
            self.argv_base() + (n * w) as u64,
            &mut ptr[..w],
        ) == w
            && ptr[..w].iter().all(|b| *b == 0)
    }

    fn argv_base(&self) -> u64 {
        if self.execveat() {
            self.args[2]
        } else {
            self.args[1]
        }
    }

    /// At most `count` arguments of at most `bytes` each (longer ones cut there).
    fn args_read(&self, count: usize, bytes: usize) -> Vec<Vec<u8>> {
        let base = self.argv_base();
        let w = self.word();
        let mut out = Vec::new();
        for i in 0..count {
            let mut ptr = [0u8; 8];
            if crate::platform::proc::read_memory(
                self.mem_pid,
                base + (i * w) as u64,
                &mut ptr[..w],
            ) < w
            {
                break;
            }
            let addr = match w {
                4 => u32::from_ne_bytes([ptr[0], ptr[1], ptr[2], ptr[3]]) as u64,
                _ => u64::from_ne_bytes(ptr),
            };
            if addr == 0 {
                break;
            }
            match read_cstr(self.mem_pid, addr, bytes) {
                Some(a) => out.push(a),
                None => break,
            }
        }
        out
    }
}

/// What process `pid` runs now: the device and inode of its program (one `statx` of
/// `/proc/PID/exe`, which the kernel resolves to the file itself). `None`: it has ended.
pub fn running_id(pid: i32) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The process (thread group) thread `tid` belongs to: an exec from another thread than the
/// first ends with the process under the first one's number.
pub fn tgid_of(tid: i32) -> i32 {
    // Most calls come from a process's first thread, which `tgkill(tid, tid, 0)` finds without
    // a look into `/proc`.
    // SAFETY: signal 0 only checks that the thread is in that group.
    if unsafe { libc::syscall(libc::SYS_tgkill, tid, tid, 0) } == 0 {
        return tid;
    }
    // One read of the head of the file (open, read, close): `Tgid` is its fourth line.
    let mut buf = [0u8; 512];
    let n = std::fs::File::open(format!("/proc/{tid}/status"))
        .and_then(|mut f| std::io::Read::read(&mut f, &mut buf))
        .unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(tid)
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
        let t = super::super::inspect::running(pid);
        let (id, args) = (running_id(pid), cmdline(pid));
        let tgid = tgid_of(pid);
        let _ = child.kill();
        let _ = child.wait();
        let t = t.expect("running");
        assert_eq!(id, Some(t.id()));
        assert!(t.name.starts_with("sleep") || t.name == "coreutils" || t.name == "busybox");
        assert_eq!(args, ["sleep", "30"]);
        assert_eq!(tgid, pid);
    }
}
