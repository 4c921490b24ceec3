//! The thread that answers every tree's exec notifications, apart from the daemon's runtime:
//! a check that reads a file never delays a reply, and a start (whose first exec waits for its
//! answer) never waits for the runtime it was called from. It blocks in `epoll_wait` on every
//! listener and answers each notification as it comes: a caller waits for nothing else.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use super::after::{After, Afters};
use super::held::{Denied, Held, DENIED_FOR};
use super::inspect::{inspect, Miss, View};
use super::notif::{self, Notification};
use super::pace::Pace;
use super::shared::{Entry, PauseRequest, Shared, ANSWERS};
use super::types::{AskStart, Refusal, Target, Verdict};
use super::{Judge, Source, Watch};

/// Events taken per `epoll_wait`.
const EVENTS: usize = 64;
/// Receives that failed in a row on one listener before the thread pauses (a kernel that kept
/// saying "readable" and failing would otherwise have it spin).
const FAILURES: u32 = 64;

pub(super) struct Loop {
    pub(super) shared: Arc<Shared>,
    entries: HashMap<u64, Entry>,
    pub(super) afters: Afters,
    pace: Pace,
    /// Execs held until a person answers, by hold number.
    pub(super) held: HashMap<u64, Held>,
    pub(super) next_hold: u64,
    /// Execs a person just denied, by caller: a shell that tries the same program again
    /// through the next `PATH` entry (`/bin` is `/usr/bin` here) is not asked twice.
    pub(super) denied: HashMap<i32, Denied>,
    /// The callers' root and the interpreters found lately.
    view: View,
    /// A hand-over's stop, asked while socket calls were under way: taken once they end.
    waiting: Option<PauseRequest>,
}

pub fn run(shared: Arc<Shared>, same_root: bool) {
    let mut l = Loop {
        view: View::new(same_root),
        shared,
        entries: HashMap::new(),
        afters: Afters::default(),
        pace: Pace::new(),
        held: HashMap::new(),
        next_hold: 1,
        denied: HashMap::new(),
        waiting: None,
    };
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; EVENTS];
    loop {
        let timeout = l.afters.timeout_ms();
        // SAFETY: `events` has room for EVENTS entries.
        let n = unsafe {
            libc::epoll_wait(
                l.shared.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                EVENTS as i32,
                timeout,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            tracing::error!("exec checks: epoll_wait failed: {e}");
            return;
        }
        for ev in &events[..n as usize] {
            match ev.u64 {
                ANSWERS => {
                    super::held::answered(&l.shared, &mut l.held, &mut l.denied, &mut l.afters)
                }
                token => l.ready(token, ev.events),
            }
        }
        l.afters.run_due();
        if let Some(r) = l.shared.take_pause().or_else(|| l.waiting.take()) {
            l.pause(r);
        }
    }
}

impl Loop {
    /// Stops here, where every notification received has been answered, for a hand-over;
    /// not while an exec waits for a person, whose answer would reach no one after it, nor
    /// while a socket call is made on a worker thread (the stop waits for those: a call that
    /// ends wakes this thread; one that does not end in time fails the hand-over's wait).
    fn pause(&mut self, r: PauseRequest) {
        if !self.held.is_empty() {
            let _ = r
                .paused
                .send(Err(self.held.values().map(|h| h.pid).collect()));
            return;
        }
        if self.shared.calls() > 0 {
            self.waiting = Some(r);
            return;
        }
        if r.paused.send(Ok(())).is_ok() {
            let _ = r.resume.recv();
        }
    }

    fn remove(&mut self, token: u64) {
        if let Some(entry) = self.entries.remove(&token) {
            // SAFETY: removes a descriptor this loop registered; it is still open.
            unsafe {
                libc::epoll_ctl(
                    self.shared.epoll.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    entry.fd(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    fn ready(&mut self, token: u64, flags: u32) {
        if !self.entries.contains_key(&token) {
            let added = std::mem::take(&mut *self.shared.lock());
            self.entries.extend(added);
        }
        let Some(entry) = self.entries.get_mut(&token) else {
            return;
        };
        match entry {
            Entry::Socket(sock, judge, cwd) => match super::filter::recv_fd(sock.as_raw_fd()) {
                Ok(Some(fd)) => {
                    let (judge, cwd) = (judge.clone(), std::mem::take(cwd));
                    self.remove(token);
                    if let Err(e) = self.shared.add(Watch {
                        source: Source::First(fd, cwd),
                        judge,
                    }) {
                        tracing::error!("exec checks: cannot watch a listener: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The child never got as far as sending it: its start failed.
                _ => self.remove(token),
            },
            Entry::Listener(t) => {
                if flags & libc::EPOLLIN as u32 != 0 {
                    match notif::recv(t.listener.as_raw_fd()) {
                        Ok(mut n) => {
                            t.failures = 0;
                            let want = self.pace.caller(n.pid);
                            if want != t.sync {
                                notif::sync_wake_up(t.listener.as_raw_fd(), want);
                                t.sync = want;
                            }
                            if let Some(cwd) = t.first.take() {
                                n.daemons_own(cwd);
                            }
                            let (listener, judge) = (t.listener.clone(), t.judge.clone());
                            self.handle(&listener, &judge, n);
                        }
                        // Its caller died or was interrupted before the receive.
                        Err(e) => {
                            t.failures += 1;
                            if t.failures >= FAILURES {
                                tracing::warn!("exec checks: receives keep failing: {e}");
                                t.failures = 0;
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                    }
                } else if flags & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                    // No process is left under the filter.
                    self.remove(token);
                }
            }
        }
    }

    /// Answers notification `n`.
    fn handle(&mut self, listener: &Arc<OwnedFd>, judge: &Arc<dyn Judge>, n: Notification) {
        let fd = listener.as_raw_fd();
        if let Some(call) = n.socket_call() {
            let root = self.view.root();
            return super::sockets::handle(&self.shared, root, (listener, judge), &n, call);
        }
        if !n.is_exec() {
            return super::held::refuse_namespace(fd, judge, &n);
        }
        // What the caller runs now: what its previous exec ran, if that one is still being
        // checked, and what this exec must change.
        let before = notif::running_id(n.pid);
        // Looked at by process: an exec from a thread other than the first leaves the process
        // under the first one's number.
        let tgid = notif::tgid_of(n.pid);
        self.afters.settle(tgid, before);
        let wants = |t: &Target| judge.wants_argv(t);
        let exec = match inspect(&n, &wants, &mut self.view) {
            Ok(exec) => exec,
            // What the kernel would answer (no such file, a loop): nothing to report.
            Err(Miss::Fails(errno)) => {
                let _ = notif::answer(fd, n.id, Some(errno));
                return;
            }
            Err(Miss::Unreadable) => {
                // Recorded first: the caller may end as soon as it has the answer.
                if notif::still_valid(fd, n.id) {
                    judge.refused(super::types::unreadable(n.pid, n.argv()));
                    let _ = notif::answer(fd, n.id, Some(libc::EACCES));
                }
                return;
            }
        };
        let refuse = |refusal: Refusal| {
            // Only the caller's own call is reported: what was read was its.
            if notif::still_valid(fd, n.id) {
                let errno = refusal.errno;
                judge.refused(refusal.report(exec.pid, n.argv(), false));
                let _ = notif::answer(fd, n.id, Some(errno));
            }
        };
        let after = After {
            judge: judge.clone(),
            before,
            checked: exec.files().map(Target::id).collect(),
            shell_caller: exec.shell_caller.get(),
            process: None,
        };
        match judge.decide(&exec) {
            Verdict::Refuse(refusal) => return refuse(refusal),
            Verdict::Allow => {}
            Verdict::Ask(rule) => {
                let file = exec.target.as_ref().map(Target::id);
                let again = self
                    .denied
                    .get(&n.pid)
                    .filter(|d| d.file == file && d.at.elapsed() < DENIED_FOR);
                // Refused as the denial was, and reported once: the retry is the same exec.
                if again.is_some() {
                    let _ = notif::answer(fd, n.id, Some(libc::EACCES));
                    return;
                }
                let hold = self.next_hold;
                let shared = self.shared.clone();
                let reply: super::Reply = Box::new(move |a| shared.post(hold, a));
                match judge.ask(&exec, rule, reply) {
                    AskStart::Allow => {}
                    AskStart::Refuse(refusal) => return refuse(refusal),
                    AskStart::Held => {
                        self.next_hold += 1;
                        let held = Held {
                            listener: listener.clone(),
                            id: n.id,
                            pid: n.pid,
                            tgid,
                            judge: judge.clone(),
                            argv: exec.argv.clone().unwrap_or_else(|| n.argv()),
                            after: After {
                                shell_caller: exec.shell_caller.get(),
                                ..after
                            },
                        };
                        self.held.insert(hold, held);
                        return;
                    }
                }
            }
        }
        // Taken before the answer, while the caller is held: the number is still its.
        let process = super::after::hold(tgid);
        if notif::answer(fd, n.id, None).is_err() {
            // The caller is gone: nothing ran.
            return;
        }
        let after = After {
            shell_caller: exec.shell_caller.get(),
            process,
            ..after
        };
        self.afters.schedule(tgid, after);
    }
}
