//! The system calls a socket call made for its caller needs: a copy of the caller's socket,
//! what the socket is, the call itself on the copy, and the thread a call that may wait runs
//! on (with the caller's umask and directory for a bind).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use super::super::types::SocketFile;

/// `sizeof(struct sockaddr_storage)`: the longest address the kernel takes for any family.
pub const MAX_ADDR: usize = 128;
/// `sizeof(struct sockaddr_un)`: the longest a Unix socket takes.
pub const UNIX_ADDR: usize = std::mem::size_of::<libc::sockaddr_un>();
/// Where `sun_path` starts (after `sun_family`).
pub const PATH_AT: usize = 2;
/// `PIDFD_THREAD` (Linux 6.9): a pidfd of one thread, whose descriptor table may be its own.
const PIDFD_THREAD: libc::c_int = libc::O_EXCL;

/// An address as the kernel takes it: its bytes and their length.
pub struct Addr {
    pub bytes: [u8; MAX_ADDR],
    pub len: usize,
}

impl Addr {
    /// A Unix address naming `path` (at most `sun_path`'s 108 bytes; the kernel ends it).
    pub fn unix(path: &[u8]) -> Option<Addr> {
        if path.len() > UNIX_ADDR - PATH_AT {
            return None;
        }
        let mut bytes = [0u8; MAX_ADDR];
        bytes[..PATH_AT].copy_from_slice(&(libc::AF_UNIX as libc::sa_family_t).to_ne_bytes());
        bytes[PATH_AT..PATH_AT + path.len()].copy_from_slice(path);
        Some(Addr {
            bytes,
            len: PATH_AT + path.len(),
        })
    }
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn owned(fd: libc::c_long) -> Result<OwnedFd, i32> {
    match fd {
        -1 => Err(errno()),
        // SAFETY: a new descriptor nothing else owns.
        fd => Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }),
    }
}

/// A copy of descriptor `num` of thread `tid` (of process `tgid`): the caller's socket, the
/// same open file. The thread's own table where the kernel can name a thread (6.9), else its
/// process's, which every thread shares unless it unshared its own.
pub fn take(tid: i32, tgid: i32, num: i32) -> Result<OwnedFd, i32> {
    // SAFETY: pidfd_open takes a pid and flags; the new descriptor is owned at once.
    let pidfd = owned(unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) })
        // SAFETY: as above.
        .or_else(|_| owned(unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) }))?;
    // SAFETY: pidfd_getfd takes a pidfd, a number and flags; the copy is owned at once.
    owned(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), num, 0) })
}

/// An integer socket option of `s`.
pub fn option(s: &OwnedFd, name: libc::c_int) -> Result<libc::c_int, i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the option is written into `v`, of the length given.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    match r {
        0 => Ok(v),
        _ => Err(errno()),
    }
}

/// Whether a connect of `s` can wait: a stream or sequenced-packet socket (a full backlog,
/// a TCP handshake). Its `O_NONBLOCK` is not asked: the caller's other threads can clear it
/// at any moment, and the flag is the caller's open file's, shared with the copy.
pub fn may_wait(s: &OwnedFd) -> bool {
    matches!(
        option(s, libc::SO_TYPE),
        Ok(libc::SOCK_STREAM | libc::SOCK_SEQPACKET)
    )
}

/// `connect(s, addr)`: 0, or the error the caller gets.
pub fn connect(s: &OwnedFd, addr: &Addr) -> Result<(), i32> {
    with_addr(libc::connect, s, addr)
}

/// `bind(s, addr)`.
pub fn bind(s: &OwnedFd, addr: &Addr) -> Result<(), i32> {
    with_addr(libc::bind, s, addr)
}

/// A call that takes a socket and an address (`connect`, `bind`).
fn with_addr(
    call: unsafe extern "C" fn(libc::c_int, *const libc::sockaddr, libc::socklen_t) -> libc::c_int,
    s: &OwnedFd,
    addr: &Addr,
) -> Result<(), i32> {
    // SAFETY: the address is `len` bytes of a live buffer.
    let r = unsafe {
        call(
            s.as_raw_fd(),
            addr.bytes.as_ptr().cast(),
            addr.len as libc::socklen_t,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(errno()),
    }
}

/// The abstract name `s` is bound to, if it is bound to one (without its leading NUL).
pub fn abstract_name(s: &OwnedFd) -> Option<Vec<u8>> {
    let mut a = Addr {
        bytes: [0u8; MAX_ADDR],
        len: 0,
    };
    let mut len = MAX_ADDR as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into the buffer.
    let r = unsafe { libc::getsockname(s.as_raw_fd(), a.bytes.as_mut_ptr().cast(), &mut len) };
    a.len = (len as usize).min(MAX_ADDR);
    let name = a.bytes.get(PATH_AT..a.len)?;
    (r == 0 && name.first() == Some(&0)).then(|| name[1..].to_vec())
}

/// What `name` in `dir` is (`dir` itself for an empty name): its type bits and identity.
fn statx(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> Result<(u32, SocketFile), i32> {
    // SAFETY: statx fills the zeroed buffer; a NUL-terminated name.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_BTIME | libc::STATX_CTIME;
    let r = unsafe { libc::statx(dir.as_raw_fd(), name.as_ptr(), flags, mask, &mut stx) };
    if r != 0 {
        return Err(errno());
    }
    let dev = libc::makedev(stx.stx_dev_major, stx.stx_dev_minor);
    let t = match stx.stx_mask & libc::STATX_BTIME {
        0 => stx.stx_ctime,
        _ => stx.stx_btime,
    };
    let born = (t.tv_sec as u64).wrapping_mul(1_000_000_000) + u64::from(t.tv_nsec);
    Ok((u32::from(stx.stx_mode), (dev, stx.stx_ino, born)))
}

/// What a path descriptor is: its type bits and identity.
pub fn kind(fd: &OwnedFd) -> Result<(u32, SocketFile), i32> {
    statx(fd, c"", libc::AT_EMPTY_PATH)
}

/// The path a descriptor was opened by, links resolved, in the daemon's view.
pub fn real_path(fd: &OwnedFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

/// The caller's umask (`Umask:` in `/proc/PID/status`, Linux 4.7); `0o077` where it cannot
/// be read: a socket file no one else may connect to, rather than one anyone may.
pub fn umask_of(tid: i32) -> libc::mode_t {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            let v = s.lines().find_map(|l| l.strip_prefix("Umask:"))?;
            libc::mode_t::from_str_radix(v.trim(), 8).ok()
        })
        .unwrap_or(0o077)
}

/// On this thread (a worker's, whose filesystem attributes are its own from then on), made
/// as the caller's: the working directory `dir` and umask `mask`, then `bind(s, name)`, and
/// what the socket file made is. The directory is left after (not held for the next call).
pub fn bind_in(
    s: &OwnedFd,
    (dir, name, mask): (&OwnedFd, &CStr, libc::mode_t),
) -> Result<Option<SocketFile>, i32> {
    // SAFETY: unshare, fchdir and umask change only this thread once it has its own
    // filesystem attributes, which is why they come first.
    unsafe {
        if libc::unshare(libc::CLONE_FS) != 0 || libc::fchdir(dir.as_raw_fd()) != 0 {
            return Err(errno());
        }
        libc::umask(mask);
    }
    let addr = Addr::unix(name.to_bytes()).ok_or(libc::ENAMETOOLONG)?;
    let bound = bind(s, &addr);
    // SAFETY: a NUL-terminated path; this thread's directory alone.
    unsafe { libc::chdir(c"/".as_ptr()) };
    bound?;
    let made = statx(dir, name, libc::AT_SYMLINK_NOFOLLOW);
    Ok(made
        .ok()
        .filter(|(mode, _)| mode & libc::S_IFMT == libc::S_IFSOCK)
        .map(|(_, id)| id))
}
