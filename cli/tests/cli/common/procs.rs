//! What the tests ask of the system about processes: whether one lives, and waiting for its
//! exit. Linux reads `/proc` and waits on a pidfd; macOS asks `ps` and waits with kqueue.

use std::time::{Duration, Instant};

/// Waits until process `pid` has exited (it may still be an unreaped zombie), at most
/// `limit`: a pidfd becomes readable at exit. True when it has.
#[cfg(target_os = "linux")]
pub fn exited_within(pid: i32, limit: Duration) -> bool {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // SAFETY: a new fd owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) };
        if n > 0 {
            return true;
        }
        let interrupted =
            n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
        if !interrupted || left.is_zero() {
            return false;
        }
    }
}

/// Waits until process `pid` has exited (it may still be an unreaped zombie), at most
/// `limit`: kqueue reports `NOTE_EXIT`. True when it has.
#[cfg(target_os = "macos")]
pub fn exited_within(pid: i32, limit: Duration) -> bool {
    use nix::errno::Errno;
    use nix::sys::event::{EvFlags, EventFilter, FilterFlag, KEvent, Kqueue};

    let kq = Kqueue::new().expect("kqueue");
    let ev = KEvent::new(
        pid as usize,
        EventFilter::EVFILT_PROC,
        EvFlags::EV_ADD | EvFlags::EV_ONESHOT,
        FilterFlag::NOTE_EXIT,
        0,
        0,
    );
    match kq.kevent(&[ev], &mut [], None) {
        Ok(_) => {}
        Err(Errno::ESRCH) => return true,
        Err(e) => panic!("cannot watch pid {pid}: {e}"),
    }
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(left.subsec_nanos()),
        };
        let mut out = [ev];
        match kq.kevent(&[], &mut out, Some(timeout)) {
            Ok(n) if n > 0 => return true,
            Err(Errno::EINTR) if !left.is_zero() => continue,
            _ => return false,
        }
    }
}

/// True while `pid` is a living (non-zombie) process.
#[cfg(target_os = "linux")]
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// True while `pid` is a living (non-zombie) process: `ps` prints its state, `Z` for a zombie,
/// nothing when it is gone.
#[cfg(target_os = "macos")]
pub fn alive(pid: i32) -> bool {
    std::process::Command::new("ps")
        .args(["-o", "stat=", "-p", &pid.to_string()])
        .output()
        .is_ok_and(|out| {
            let state = String::from_utf8_lossy(&out.stdout);
            let state = state.trim();
            !state.is_empty() && !state.starts_with('Z')
        })
}
