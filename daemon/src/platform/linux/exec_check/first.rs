//! A tree's first exec, answered by the thread that started the tree, while it waits for that
//! exec: no other thread is woken for the one exec every command makes (its shell). The child
//! is the daemon's own until then: what it names is read in the daemon's memory and view.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::filter;
use super::inspect::{inspect, Miss, View};
use super::notif;
use super::types::{Refusal, Target, Verdict};
use super::Judge;

/// Waits until `fd` is readable (`true`) or the child has ended, which makes `done` readable
/// (`false`).
fn readable(fd: RawFd, done: RawFd) -> std::io::Result<bool> {
    loop {
        let mut fds = [
            libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: done,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two pollfds of the length given.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if fds[0].revents != 0 {
            return Ok(fds[0].revents & libc::POLLIN != 0);
        }
        if fds[1].revents != 0 {
            return Ok(false);
        }
    }
}

/// Receives the listener the child sends on `socket` and answers the child's first exec (its
/// `cwd` the directory it execs in); the listener, for the execs that follow, or `None` when
/// the child ended before it sent one.
pub fn answer_first(
    socket: &OwnedFd,
    done: RawFd,
    cwd: &Path,
    judge: &Arc<dyn Judge>,
    view: &Mutex<View>,
) -> std::io::Result<Option<OwnedFd>> {
    if !readable(socket.as_raw_fd(), done)? {
        return Ok(None);
    }
    let Some(listener) = filter::recv_fd(socket.as_raw_fd())? else {
        return Ok(None);
    };
    let fd = listener.as_raw_fd();
    if !readable(fd, done)? {
        return Ok(Some(listener));
    }
    let mut n = notif::recv(fd)?;
    n.daemons_own(cwd.to_path_buf());
    let wants = |t: &Target| judge.wants_argv(t);
    let exec = inspect(
        &n,
        &wants,
        &mut view.lock().unwrap_or_else(|e| e.into_inner()),
    );
    let refuse = |r: Refusal| {
        let errno = r.errno;
        judge.refused(r.report(n.pid, n.argv(), false));
        notif::answer(fd, n.id, Some(errno))
    };
    let answered = match exec {
        Err(Miss::Fails(errno)) => notif::answer(fd, n.id, Some(errno)),
        Err(Miss::Unreadable) => {
            judge.refused(super::types::unreadable(n.pid, n.argv()));
            notif::answer(fd, n.id, Some(libc::EACCES))
        }
        Ok(exec) => match judge.decide(&exec) {
            Verdict::Allow => notif::answer(fd, n.id, None),
            Verdict::Refuse(r) => refuse(r),
            // Held, it would hold the start: a command's own shell is not put to the person.
            Verdict::Ask(rule) => refuse(Refusal {
                rule: "ask",
                program: exec.path.clone(),
                message: format!(
                    "the shell that runs the command matches {rule}; a command's own shell \
                     cannot wait for an approval"
                ),
                errno: libc::EACCES,
            }),
        },
    };
    answered?;
    Ok(Some(listener))
}
