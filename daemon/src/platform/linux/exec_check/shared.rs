//! What the checker thread and the spawns share: the `epoll` every listener is registered
//! in, the entries added since the thread last looked, and the answers people gave to held
//! execs (with the descriptor that wakes the thread for them).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{Judge, Source, Watch};

/// The token of the descriptor that says answers to held execs are in.
pub const ANSWERS: u64 = u64::MAX;

/// What one registered descriptor is.
pub enum Entry {
    /// The socket a child sends its listener on, and the directory it starts in.
    Socket(OwnedFd, Arc<dyn Judge>, PathBuf),
    Listener(Tree),
}

/// A tree's listener as the thread keeps it.
pub struct Tree {
    pub listener: Arc<OwnedFd>,
    pub judge: Arc<dyn Judge>,
    /// Receives that failed on it in a row.
    pub failures: u32,
    /// Whether it asks for wake-ups on the current CPU.
    pub sync: bool,
    /// Until its first exec: the directory of the daemon's own child that makes it. That
    /// child shares the daemon's memory, which is not dumpable, so its `/proc` entries are
    /// closed to the daemon: its call is read from the daemon's own memory (the same, or a
    /// copy of it), its paths from the daemon's root and that directory.
    pub first: Option<PathBuf>,
}

impl Entry {
    pub fn fd(&self) -> RawFd {
        match self {
            Entry::Socket(s, _, _) => s.as_raw_fd(),
            Entry::Listener(t) => t.listener.as_raw_fd(),
        }
    }
}

/// What the thread and the spawns share: the `epoll` and the entries added since the thread
/// last looked.
pub struct Shared {
    pub epoll: OwnedFd,
    added: Mutex<Vec<(u64, Entry)>>,
    next: AtomicU64,
    /// Answers to held execs (by hold number), and the descriptor that wakes the thread for
    /// them.
    pub answers: Mutex<Vec<(u64, Result<(), String>)>>,
    pub wake: OwnedFd,
    /// A hand-over's request that the thread stop between two notifications.
    pause: Mutex<Option<PauseRequest>>,
    pause_asked: AtomicBool,
    /// Socket calls being made on worker threads (`sockets.rs`): a hand-over waits for them,
    /// whose callers' answers would reach no one after it.
    calls: AtomicUsize,
    /// The daemon's own socket (see `peers.rs`).
    pub own_socket: PathBuf,
    /// The threads socket calls that can wait are made on.
    pub workers: Arc<super::workers::Workers>,
}

/// A hand-over's request that the checker thread stop: it answers on `paused` once no
/// notification is half-handled (`Err` with the callers whose execs wait for a person, and
/// then it goes on), and waits until `resume` says so or is dropped. A program that replaces
/// this one by an exec finds every exec not yet received still queued in the kernel.
pub struct PauseRequest {
    pub paused: tokio::sync::oneshot::Sender<Result<(), Vec<i32>>>,
    pub resume: std::sync::mpsc::Receiver<()>,
}

impl Shared {
    pub fn new(own_socket: PathBuf) -> io::Result<Shared> {
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
            pause: Mutex::new(None),
            pause_asked: AtomicBool::new(false),
            calls: AtomicUsize::new(0),
            own_socket,
            workers: Arc::default(),
        })
    }

    /// The answer to held exec `hold` (from any thread): the checker answers the kernel.
    pub fn post(&self, hold: u64, answer: Result<(), String>) {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((hold, answer));
        self.wake_thread();
    }

    fn wake_thread(&self) {
        let one = 1u64;
        // SAFETY: an eventfd takes 8 bytes; a full counter has woken the thread already.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// A socket call begins on a worker thread: false (not counted) when `max` are.
    pub fn calls_begin(&self, max: usize) -> bool {
        let prev = self.calls.fetch_add(1, Ordering::AcqRel);
        if prev >= max {
            self.calls.fetch_sub(1, Ordering::AcqRel);
        }
        prev < max
    }

    /// It ended: the checker thread looks again at a hand-over waiting for it.
    pub fn calls_end(&self) {
        self.calls.fetch_sub(1, Ordering::AcqRel);
        self.wake_thread();
    }

    /// Socket calls under way on threads of their own.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Acquire)
    }

    /// Asks the thread to stop (from any thread).
    pub fn request_pause(&self, r: PauseRequest) {
        *self.pause.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        self.pause_asked.store(true, Ordering::Release);
        self.wake_thread();
    }

    /// The stop asked for, if any (the thread, between two batches of events).
    pub fn take_pause(&self) -> Option<PauseRequest> {
        if !self.pause_asked.swap(false, Ordering::Acquire) {
            return None;
        }
        self.pause.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Registers `w` (from any thread): its entry first, then its descriptor, so the thread
    /// finds the entry of every event it gets.
    pub fn add(&self, w: Watch) -> io::Result<()> {
        let entry = match w.source {
            Source::Socket(sock, cwd) => Entry::Socket(sock, w.judge, cwd),
            Source::Listener(fd) => listening(fd, w.judge, None),
            Source::First(fd, cwd) => listening(fd, w.judge, Some(cwd)),
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

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Entry)>> {
        self.added.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A listener as the thread keeps it, the record told of it (for a hand-over).
pub fn listening(fd: OwnedFd, judge: Arc<dyn Judge>, first: Option<PathBuf>) -> Entry {
    let listener = Arc::new(fd);
    judge.listening(listener.clone());
    Entry::Listener(Tree {
        listener,
        judge,
        failures: 0,
        sync: false,
        first,
    })
}
