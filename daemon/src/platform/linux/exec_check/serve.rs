//! The thread that answers every tree's exec notifications, apart from the daemon's runtime:
//! a check that reads a file never delays a reply, and a start (whose first exec waits for its
//! answer) never waits for the runtime it was called from. It blocks in `epoll_wait` on every
//! listener and answers each notification as it comes: a caller waits for nothing else.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::after::{After, Afters};
use super::notif::{self, Notification};
use super::pace::Pace;
use super::types::{AskStart, Refusal, Target, Verdict};
use super::{Judge, Source, Watch};

/// Events taken per `epoll_wait`.
const EVENTS: usize = 64;
/// The token of the descriptor that says answers to held execs are in.
const ANSWERS: u64 = u64::MAX;
/// Receives that failed in a row on one listener before the thread pauses (a kernel that kept
/// saying "readable" and failing would otherwise have it spin).
const FAILURES: u32 = 64;

/// What one registered descriptor is.
enum Entry {
    /// The socket a child sends its listener on.
    Socket(OwnedFd, Arc<dyn Judge>),
    /// A tree's listener, the receives that failed on it in a row, and whether it asks for
    /// wake-ups on the current CPU.
    Listener(Arc<OwnedFd>, Arc<dyn Judge>, u32, bool),
}

impl Entry {
    fn fd(&self) -> RawFd {
        match self {
            Entry::Socket(s, _) => s.as_raw_fd(),
            Entry::Listener(l, _, _, _) => l.as_raw_fd(),
        }
    }
}

/// What the thread and the spawns share: the `epoll` and the entries added since the thread
/// last looked.
pub struct Shared {
    epoll: OwnedFd,
    added: Mutex<Vec<(u64, Entry)>>,
    next: AtomicU64,
    /// Answers to held execs (by hold number), and the descriptor that wakes the thread for
    /// them.
    answers: Mutex<Vec<(u64, Result<(), String>)>>,
    wake: OwnedFd,
}

impl Shared {
    pub fn new() -> io::Result<Shared> {
        // SAFETY: epoll_create1 takes flags; the new descriptor is owned at once.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nothing else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        // SAFETY: eventfd takes a count and flags; the new descriptor is owned at once.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nothing else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: ANSWERS,
        };
        // SAFETY: registers the live eventfd with a valid event.
        let r = unsafe {
            libc::epoll_ctl(
                epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                wake.as_raw_fd(),
                &mut ev,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Shared {
            epoll,
            added: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
            answers: Mutex::new(Vec::new()),
            wake,
        })
    }

    /// The answer to held exec `hold` (from any thread): the checker answers the kernel.
    fn post(&self, hold: u64, answer: Result<(), String>) {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((hold, answer));
        let one = 1u64;
        // SAFETY: an eventfd takes 8 bytes; a full counter has woken the thread already.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Registers `w` (from any thread): its entry first, then its descriptor, so the thread
    /// finds the entry of every event it gets.
    pub fn add(&self, w: Watch) -> io::Result<()> {
        let entry = match w.source {
            Source::Socket(sock) => Entry::Socket(sock, w.judge),
            Source::Listener(fd) => listening(fd, w.judge),
        };
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let fd = entry.fd();
        self.lock().push((token, entry));
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32,
            u64: token,
        };
        // SAFETY: registers a live descriptor (owned by the entry just queued) with a valid event.
        let r =
            unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r != 0 {
            let e = io::Error::last_os_error();
            self.lock().retain(|(t, _)| *t != token);
            return Err(e);
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Entry)>> {
        self.added.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A listener as the thread keeps it, the record told of it (for a hand-over).
fn listening(fd: OwnedFd, judge: Arc<dyn Judge>) -> Entry {
    let listener = Arc::new(fd);
    judge.listening(listener.clone());
    Entry::Listener(listener, judge, 0, false)
}

struct Loop {
    shared: Arc<Shared>,
    entries: HashMap<u64, Entry>,
    afters: Afters,
    pace: Pace,
    /// Execs held until a person answers, by hold number.
    held: HashMap<u64, Held>,
    next_hold: u64,
    /// Execs a person just denied, by caller: a shell that tries the same program again
    /// through the next `PATH` entry (`/bin` is `/usr/bin` here) is not asked twice.
    denied: HashMap<i32, Denied>,
}

/// A denial, for the caller's next try of the same file.
struct Denied {
    file: Option<(u64, u64)>,
    at: Instant,
}

/// How long a denial answers a caller's tries of the same file.
const DENIED_FOR: Duration = Duration::from_secs(5);
/// Denials remembered at most (the oldest go first).
const MAX_DENIED: usize = 1024;

/// An exec held for a person's answer: what answering it later needs.
struct Held {
    listener: Arc<OwnedFd>,
    id: u64,
    pid: i32,
    judge: Arc<dyn Judge>,
    argv: Vec<String>,
    after: After,
}

pub fn run(shared: Arc<Shared>) {
    let mut l = Loop {
        shared,
        entries: HashMap::new(),
        afters: Afters::default(),
        pace: Pace::new(),
        held: HashMap::new(),
        next_hold: 1,
        denied: HashMap::new(),
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
                ANSWERS => l.answers(),
                token => l.ready(token, ev.events),
            }
        }
        l.afters.run_due();
    }
}

impl Loop {
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
            Entry::Socket(sock, judge) => match super::filter::recv_fd(sock.as_raw_fd()) {
                Ok(Some(fd)) => {
                    let judge = judge.clone();
                    self.remove(token);
                    if let Err(e) = self.shared.add(Watch {
                        source: Source::Listener(fd),
                        judge,
                    }) {
                        tracing::error!("exec checks: cannot watch a listener: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The child never got as far as sending it: its start failed.
                _ => self.remove(token),
            },
            Entry::Listener(listener, judge, failures, sync) => {
                if flags & libc::EPOLLIN as u32 != 0 {
                    match notif::recv(listener.as_raw_fd()) {
                        Ok(n) => {
                            *failures = 0;
                            let want = self.pace.caller(n.pid);
                            if want != *sync {
                                notif::sync_wake_up(listener.as_raw_fd(), want);
                                *sync = want;
                            }
                            let (listener, judge) = (listener.clone(), judge.clone());
                            self.handle(&listener, &judge, n);
                        }
                        // Its caller died or was interrupted before the receive.
                        Err(e) => {
                            *failures += 1;
                            if *failures >= FAILURES {
                                tracing::warn!("exec checks: receives keep failing: {e}");
                                *failures = 0;
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
        // What the caller runs now: what its previous exec ran, if that one is still being
        // checked, and what this exec must change.
        let before = notif::running_id(n.pid);
        self.afters.settle(n.pid, before);
        let wants = |name: &str| judge.wants_argv(name);
        let Some(exec) = n.exec(&wants) else {
            // Recorded first: the caller may end as soon as it has the answer.
            if notif::still_valid(fd, n.id) {
                judge.refused(super::types::unreadable(n.pid, n.argv()));
                let _ = notif::answer(fd, n.id, Some(libc::EACCES));
            }
            return;
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
        if notif::answer(fd, n.id, None).is_err() {
            // The caller is gone: nothing ran.
            return;
        }
        let after = After {
            shell_caller: exec.shell_caller.get(),
            ..after
        };
        self.afters.schedule(n.pid, after);
    }

    /// Answers the held execs a person has answered.
    fn answers(&mut self) {
        let mut count = 0u64;
        // SAFETY: an eventfd reads into 8 bytes.
        unsafe {
            libc::read(
                self.shared.wake.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                8,
            )
        };
        let answers = std::mem::take(
            &mut *self
                .shared
                .answers
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for (hold, answer) in answers {
            let Some(h) = self.held.remove(&hold) else {
                continue;
            };
            let fd = h.listener.as_raw_fd();
            match answer {
                Ok(()) => {
                    if notif::answer(fd, h.id, None).is_ok() {
                        self.afters.schedule(h.pid, h.after);
                    }
                }
                Err(reason) => {
                    if self.denied.len() >= MAX_DENIED {
                        let now = Instant::now();
                        self.denied
                            .retain(|_, d| now.duration_since(d.at) < DENIED_FOR);
                    }
                    if self.denied.len() < MAX_DENIED {
                        let denial = Denied {
                            file: h.after.checked.first().copied(),
                            at: Instant::now(),
                        };
                        self.denied.insert(h.pid, denial);
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
}
