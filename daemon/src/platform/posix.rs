//! What Linux and macOS do the same way (plain POSIX), shared by both implementations; each
//! re-exports these under its own concern's module.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Whether process group `pgrp` still has a member (one we may signal or not).
pub fn group_alive(pgrp: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the group exists and may be signalled.
    let alive = unsafe { libc::kill(-pgrp, 0) } == 0;
    alive || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// SIGKILL to a child that must not run on (its limits could not be applied), and to its
/// group: it is our own child, so its pid cannot have been reused before we reap it.
pub fn kill_child(pid: i32) {
    // SAFETY: kill(2) on our own child's process group and pid; the reaper collects it.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Makes every descriptor above stderr that `listing` (the system's directory of this process's
/// descriptors) names close-on-exec: what the daemon inherited from whoever started it (an
/// editor, a shell) is not for its children. Call before any thread exists.
pub fn close_listed_fds_on_exec(listing: &str) {
    let Ok(dir) = std::fs::read_dir(listing) else {
        return;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_GETFD/F_SETFD on a descriptor number; a closed one (the directory's own,
        // gone by now) only fails with EBADF.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// Sets or clears close-on-exec on `fd`.
pub fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor number; a closed one is an error, nothing else.
    let r = unsafe { libc::fcntl(fd, libc::F_SETFD, if on { libc::FD_CLOEXEC } else { 0 }) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The inode of a pipe (shared by both ends): what identifies it as a reader's input.
pub fn pipe_id(fd: &impl AsRawFd) -> Option<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat on an fd the caller keeps open, into a buffer of the right type.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: fstat succeeded, so it filled the buffer.
    let st = unsafe { st.assume_init() };
    Some(st.st_ino)
}

/// Portable now (`platform/usage.rs`); kept here for the Unix cgroup modules that name them so.
pub use super::usage::{CgroupSlot, CgroupUsage};

/// Adds the hook that sets the configured rlimits (soft = hard, so the command cannot raise
/// them) in the child before its exec, with `set` (the platform's `setrlimit`, on the
/// platform's `resource` numbers): no moment in which the command runs without them. A limit
/// that cannot be set fails the spawn.
pub fn install_rlimits<R: Copy + Send + Sync + 'static>(
    cmd: &mut crate::platform::spawn::Spawn,
    limits: &crate::base::config::Limits,
    resource: fn(crate::base::config::Rlimit) -> R,
    set: unsafe extern "C" fn(R, *const libc::rlimit) -> libc::c_int,
) {
    let limits: Vec<(R, u64)> = limits
        .rlimits()
        .into_iter()
        .map(|(limit, value, _)| (resource(limit), value))
        .collect();
    if limits.is_empty() {
        return;
    }
    // The hook only reads the list built here and calls setrlimit, async-signal-safe.
    cmd.hook(Box::new(move || {
        for &(resource, value) in &limits {
            let lim = libc::rlimit {
                rlim_cur: value as libc::rlim_t,
                rlim_max: value as libc::rlim_t,
            };
            // SAFETY: setrlimit with a valid rlimit.
            if unsafe { set(resource, &lim) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }));
}

/// The detached daemon's end of its start-up pipe: [`Started::ready`] lets the waiting parent
/// exit 0; dropped unsaid (the daemon failed to start), the parent exits 1. Either way the
/// client that started it learns at once, and reads the reason from the log.
pub struct Started(Option<std::os::fd::OwnedFd>);

impl Started {
    /// The daemon serves (or another one does): the parent may go.
    pub fn ready(&mut self) {
        if let Some(fd) = self.0.take() {
            // SAFETY: a one-byte write from a live buffer to a descriptor we own.
            unsafe { libc::write(fd.as_raw_fd(), b"1".as_ptr().cast(), 1) };
        }
    }
}

/// In the daemon, before any thread exists: fork; the parent waits (up to `limit`) until the
/// child says it serves or ends, and exits 0 or 1; the child starts a new session with `/` as
/// its working directory (stdio stays as it is).
pub fn detach(limit: std::time::Duration) -> io::Result<Started> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array it is given.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the two descriptors pipe just made, owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [&read, &write] {
        // SAFETY: fcntl on a descriptor we own; its children must not hold the pipe.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: fork with no other thread running; the parent only polls, reads and _exits.
    match unsafe { libc::fork() } {
        -1 => return Err(io::Error::last_os_error()),
        0 => {}
        _ => {
            drop(write);
            let mut poll = libc::pollfd {
                fd: read.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = libc::c_int::try_from(limit.as_millis()).unwrap_or(libc::c_int::MAX);
            let mut byte = [0u8; 1];
            // SAFETY: poll on one pollfd, then a read into a one-byte buffer.
            let said = unsafe {
                libc::poll(&mut poll, 1, ms) == 1
                    && libc::read(read.as_raw_fd(), byte.as_mut_ptr().cast(), 1) == 1
            };
            // No word within the limit: the client's own wait for the socket goes on.
            let timed_out = poll.revents == 0;
            let code = if said || timed_out { 0 } else { 1 };
            // SAFETY: _exit ends the parent at once, without running its destructors twice.
            unsafe { libc::_exit(code) }
        }
    }
    drop(read);
    // SAFETY: setsid and chdir (on a NUL-terminated path) have no other preconditions.
    if unsafe { libc::setsid() } < 0 || unsafe { libc::chdir(c"/".as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Started(Some(write)))
}
