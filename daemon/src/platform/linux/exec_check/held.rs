//! Execs held for a person's answer, and answered when it comes (a denial remembered for the
//! shell's next try of the same file); and the namespace and mount calls a checked tree may
//! not make.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::after::After;
use super::after::Afters;
use super::notif::{self, Notification};
use super::shared::Shared;
use super::Judge;

/// A denial, for the caller's next try of the same file.
pub(super) struct Denied {
    pub(super) file: Option<(u64, u64)>,
    pub(super) at: Instant,
}

/// How long a denial answers a caller's tries of the same file.
pub(super) const DENIED_FOR: Duration = Duration::from_secs(5);
/// Denials remembered at most (the oldest go first).
pub(super) const MAX_DENIED: usize = 1024;

/// An exec held for a person's answer: what answering it later needs.
pub(super) struct Held {
    pub(super) listener: Arc<OwnedFd>,
    pub(super) id: u64,
    pub(super) pid: i32,
    /// Its process, by which the look after its exec is made.
    pub(super) tgid: i32,
    pub(super) judge: Arc<dyn Judge>,
    pub(super) argv: Vec<String>,
    pub(super) after: After,
}

/// A namespace or mount call of a checked tree: refused (EPERM) and reported, since what the
/// tree ran in a namespace of its own would be judged in a view of the files it controls.
pub(super) fn refuse_namespace(fd: RawFd, judge: &Arc<dyn Judge>, n: &Notification) {
    if !notif::still_valid(fd, n.id) {
        return;
    }
    let argv = notif::cmdline(n.pid);
    let program = argv.first().cloned().unwrap_or_default();
    judge.refused(cuba_protocol::ExecBlocked {
        program,
        argv,
        rule: "namespaces".to_string(),
        message: format!(
            "{} would make a namespace or change mounts, which a checked command may not \
             (what runs there could not be checked); the user can set namespaces = \"allow\"",
            n.call_name()
        ),
        pid: n.pid as u32,
        killed: false,
    });
    let _ = notif::answer(fd, n.id, Some(libc::EPERM));
}

/// Answers the held execs a person has answered.
pub(super) fn answered(
    shared: &Shared,
    held: &mut HashMap<u64, Held>,
    denied: &mut HashMap<i32, Denied>,
    afters: &mut Afters,
) {
    let mut count = 0u64;
    // SAFETY: an eventfd reads into 8 bytes.
    unsafe { libc::read(shared.wake.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    let answers = std::mem::take(&mut *shared.answers.lock().unwrap_or_else(|e| e.into_inner()));
    for (hold, answer) in answers {
        let Some(h) = held.remove(&hold) else {
            continue;
        };
        let fd = h.listener.as_raw_fd();
        match answer {
            Ok(()) => {
                // Taken before the answer, while the caller is held.
                let mut after = h.after;
                after.process = super::after::hold(h.tgid);
                if notif::answer(fd, h.id, None).is_ok() {
                    afters.schedule(h.tgid, after);
                }
            }
            Err(reason) => {
                if denied.len() >= MAX_DENIED {
                    let now = Instant::now();
                    denied.retain(|_, d| now.duration_since(d.at) < DENIED_FOR);
                }
                if denied.len() < MAX_DENIED {
                    let denial = Denied {
                        file: h.after.checked.first().copied(),
                        at: Instant::now(),
                    };
                    denied.insert(h.pid, denial);
                }
                if notif::still_valid(fd, h.id) {
                    let program = h.argv.first().cloned().unwrap_or_default();
                    h.judge.refused(cuba_protocol::ExecBlocked {
                        program,
                        argv: h.argv,
                        rule: "ask".to_string(),
                        message: format!("its exec was not approved: {reason}"),
                        pid: h.pid as u32,
                        killed: false,
                    });
                    let _ = notif::answer(fd, h.id, Some(libc::EACCES));
                }
            }
        }
    }
}
