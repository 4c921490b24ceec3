//! The thread that answers every tree's exec notifications, apart from the daemon's runtime:
//! a check that reads a file never delays a reply, and a start (whose first exec waits for its
//! answer) never waits for the runtime it was called from.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

use super::notif::{self, Notification};
use super::types::Exec;
use super::{Judge, Source, Watch};

/// How long the check after an exec whose path could change looks for the new program.
const AFTER: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

pub fn run(mut rx: mpsc::UnboundedReceiver<Watch>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("exec checks: cannot start their runtime: {e}");
            return;
        }
    };
    rt.block_on(async move {
        while let Some(w) = rx.recv().await {
            tokio::spawn(watch(w));
        }
    });
}

async fn watch(w: Watch) {
    let listener = match w.source {
        Source::Listener(fd) => Arc::new(fd),
        Source::Socket(sock) => match receive(sock).await {
            Some(fd) => Arc::new(fd),
            // The child never got as far as sending it: its start failed.
            None => return,
        },
    };
    w.judge.listening(listener.clone());
    // SAFETY: the listener is shared with the record, which never closes or changes it while
    // this AsyncFd lives (the Arc keeps it open).
    let registered = unsafe {
        AsyncFd::register_with_interest(ArcFd(listener.clone()), tokio::io::Interest::READABLE)
    };
    let Ok(afd) = registered else {
        tracing::error!("exec checks: cannot watch a listener");
        return;
    };
    loop {
        let Ok(mut guard) = afd.readable().await else {
            return;
        };
        // Everything pending now: the readiness is edge-triggered.
        while pending(listener.as_raw_fd()) {
            match notif::recv(listener.as_raw_fd()) {
                Ok(n) => handle(&listener, &w.judge, n),
                // Its caller died or was interrupted before the receive.
                Err(_) => continue,
            }
        }
        if hung_up(listener.as_raw_fd()) {
            // No process is left under the filter.
            return;
        }
        guard.clear_ready();
    }
}

fn handle(listener: &Arc<OwnedFd>, judge: &Arc<dyn Judge>, n: Notification) {
    let fd = listener.as_raw_fd();
    let exec = n.exec();
    // What was read is the caller's only if it is still waiting on this same call.
    if !notif::still_valid(fd, n.id) {
        return;
    }
    let Some(exec) = exec else {
        // Recorded first: the caller may end as soon as it has the answer.
        judge.refused(super::types::unreadable(n.pid, n.argv()));
        let _ = notif::answer(fd, n.id, Some(libc::EACCES));
        return;
    };
    match judge.decide(&exec) {
        Some(refusal) => {
            let errno = refusal.errno;
            judge.refused(refusal.report(exec.pid, n.argv(), false));
            let _ = notif::answer(fd, n.id, Some(errno));
        }
        None => {
            // Taken while the call is known to be this caller's: the pid cannot be another's.
            let before = exec
                .shared_memory
                .then(|| (notif::running(exec.pid), pidfd(exec.pid)));
            if notif::answer(fd, n.id, None).is_err() {
                return;
            }
            if let Some((before, Some(pidfd))) = before {
                let argv = n.argv();
                tokio::spawn(after_exec(judge.clone(), exec, (before, pidfd), argv));
            }
        }
    }
}

/// The check after an exec whose caller shares its memory with another thread: that thread
/// may have changed the path between the check and the kernel's read. The program running
/// once the exec happened is checked as well, and killed if it is refused.
async fn after_exec(
    judge: Arc<dyn Judge>,
    exec: Exec,
    (before, pidfd): (Option<super::types::Target>, OwnedFd),
    argv: Vec<String>,
) {
    let id = |t: &super::types::Target| (t.dev, t.ino);
    let was = before.as_ref().map(id);
    let checked = exec.target.as_ref().map(id);
    for ms in AFTER {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let Some(now) = notif::running(exec.pid) else {
            return;
        };
        if Some(id(&now)) == was {
            continue;
        }
        if Some(id(&now)) == checked {
            return;
        }
        let ran = Exec {
            pid: exec.pid,
            path: now.path.display().to_string(),
            target: Some(now),
            interpreters: Vec::new(),
            shared_memory: false,
        };
        if let Some(refusal) = judge.decide(&ran) {
            // SAFETY: a pidfd this task owns; no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            judge.refused(refusal.report(exec.pid, argv, true));
        }
        return;
    }
}

fn pidfd(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the new descriptor is owned here.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a new descriptor nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Receives the listener the child sends on `sock` (EOF: it sent none).
async fn receive(sock: OwnedFd) -> Option<OwnedFd> {
    // SAFETY: an OwnedFd moved into the AsyncFd, open and unchanged for its whole life.
    let afd =
        unsafe { AsyncFd::register_with_interest(sock, tokio::io::Interest::READABLE) }.ok()?;
    loop {
        let mut guard = afd.readable().await.ok()?;
        match recv_fd(afd.get_ref().as_raw_fd()) {
            Ok(fd) => return fd,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => guard.clear_ready(),
            Err(_) => return None,
        }
    }
}

fn recv_fd(sock: RawFd) -> std::io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cmsg = [0u64; 4];
    // SAFETY: the message points at live buffers; the descriptor read is checked to be one
    // SCM_RIGHTS entry before it is owned.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if n == 0 || c.is_null() {
            return Ok(None);
        }
        if (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Ok(None);
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
        Ok(Some(OwnedFd::from_raw_fd(fd)))
    }
}

fn poll_now(fd: RawFd) -> i16 {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, no wait.
    match unsafe { libc::poll(&mut p, 1, 0) } {
        1 => p.revents,
        _ => 0,
    }
}

fn pending(fd: RawFd) -> bool {
    poll_now(fd) & libc::POLLIN != 0
}

fn hung_up(fd: RawFd) -> bool {
    poll_now(fd) & (libc::POLLHUP | libc::POLLERR) != 0
}

/// A shared listener as tokio's `AsyncFd` wants it.
struct ArcFd(Arc<OwnedFd>);

impl AsRawFd for ArcFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
