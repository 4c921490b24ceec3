//! The supervisor: one task per process that owns its output pipes, its timers and its stop
//! sequence. Output, exit, timeouts and control messages are all events in one `select!`; the
//! handling lives beside it (`exit.rs`, `input.rs`, `command.rs`).
//!
//! The exit is detected from the tracked process itself (its status from the reaper), not from
//! the pipes closing, so a grandchild holding a pipe cannot delay the report. Before the exit is
//! published, whatever the process left in its pipes is read, so even a 1 ms process has all of
//! its output in the record. Processes of the tree left behind are then stopped (TERM, grace,
//! KILL), and the pipes drained until they close.

mod command;
mod exit;
mod input;
mod leftover;
mod orphan;
mod read;
mod report;
mod route;
mod timers;

use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::Stream;
use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::parts::terminal::Master;
use crate::platform::cgroup::ProcCgroup;
use crate::platform::Exit;
#[cfg(unix)]
use crate::state::record::Paused;
use crate::state::record::{Control, Writer};
use crate::state::table::Table;
#[cfg(unix)]
pub use input::reads_terminal;
pub use input::InputTarget;
pub use leftover::Leftover;
pub use orphan::Orphan;
use read::{grow, read_now, read_some};
pub use route::Route;

/// Read buffers start small (most processes print little, and a thousand idle ones must stay
/// cheap) and grow while reads fill them, up to the pipe size.
const READ_BUF_MIN: usize = 8 * 1024;
const READ_BUF_MAX: usize = 1024 * 1024;
/// A terminal read this large means a flood: the next read waits [`FLOOD_PAUSE`].
const FLOOD_READ: usize = 1024;
const FLOOD_PAUSE: Duration = Duration::from_millis(1);
/// Pipe buffer asked for once a child writes fast (the first read that fills the smallest
/// buffer), so it needs fewer wake-ups (capped by the kernel setting).
#[cfg(unix)]
const PIPE_SIZE: i32 = 1024 * 1024;
/// After the exit, how long to wait for pipes held by processes outside our reach.
const ABANDON_AFTER: Duration = Duration::from_secs(1);
/// Most bytes read per stream at the exit: more than a pipe holds, so all the exited process
/// wrote, while a grandchild writing without pause cannot keep the loop going.
const DRAIN_LIMIT: usize = 4 * READ_BUF_MAX;
/// How long new output may stay in memory only before it is written to the spool (see
/// `Output`): long enough that a short command's reply does not wait for the spool's files,
/// short enough that what a running process printed is on disk should the daemon die.
const SPILL_AFTER: Duration = Duration::from_millis(10);

/// On Windows, how long the threads reading a process's pipes get after its exit to hand over
/// the rest (a process it left behind that holds them gets the abandon time as on Unix).
#[cfg(windows)]
const SETTLE_WITHIN: Duration = Duration::from_millis(250);

/// Something to undo once the process has ended and its output is in (a cgroup, a script file).
/// It runs on the runtime's thread and must not block: what may wait for the kernel (a file's
/// or a cgroup's removal) it hands to [`crate::base::blocking::off_runtime`].
pub type Cleanup = Box<dyn FnOnce() + Send>;

/// What a supervisor is given besides its child.
pub struct Job {
    pub table: Arc<Table>,
    /// TERM → KILL grace period when stopping the tree.
    pub grace: Duration,
    /// The process's hard time limit.
    pub timeout: Option<Duration>,
    /// A session's shell: where its output goes.
    pub route: Option<Box<dyn Route>>,
    pub cleanup: Vec<Cleanup>,
    /// A process handed over by an in-place upgrade: the stop escalation still to come.
    pub kill_in: Option<Duration>,
    /// Its MCP client's exit, watched to stop it should it wait for input unanswerable.
    pub orphan: Option<Orphan>,
    /// What becomes of it when its client goes or nobody attends to it.
    pub leftover: Option<Leftover>,
}

/// Where output comes from: a pipe (stdout, stderr), or a terminal's master end (both).
pub enum Source {
    Pipe(Pipe),
    Pty(Arc<Master>),
}

/// An output pipe as the runtime reads it: on Windows a thread's chunks
/// (`platform::windows::threaded`).
#[cfg(unix)]
pub type Pipe = tokio::net::unix::pipe::Receiver;
#[cfg(windows)]
pub type Pipe = crate::platform::windows::threaded::Reader;

/// The child as its supervisor holds it.
pub struct ChildIo {
    /// `None` only for a process handed over after its stdout had closed.
    pub stdout: Option<Source>,
    /// `None` on a terminal: it has one output stream.
    pub stderr: Option<Source>,
    pub exit: oneshot::Receiver<Exit>,
    pub input: Option<InputTarget>,
}

/// A process's supervisor: the writer of its record (borrowed from [`supervise`], which keeps
/// it to end the record should this fail).
struct Supervisor<'w> {
    table: Arc<Table>,
    grace: Duration,
    p: &'w Writer,
    stdout: Option<Source>,
    stderr: Option<Source>,
    exited: bool,
    timeout_at: Option<Instant>,
    kill_at: Option<Instant>,
    abandon_at: Option<Instant>,
    input: Option<InputTarget>,
    /// When to look whether the tree is blocked reading stdin; `checks` done since the last
    /// output or stdin write.
    input_check_at: Option<Instant>,
    checks: u32,
    orphan: Option<Orphan>,
    leftover: Option<Leftover>,
    route: Option<Box<dyn Route>>,
    /// An interrupted session command that has not ended: SIGKILL below the shell at
    /// `cmd_kill_at`, and the session stopped at `cmd_abandon_at` if even that did not end it.
    cmd_kill_at: Option<Instant>,
    cmd_abandon_at: Option<Instant>,
    /// When to interrupt that command again, and how often it has been.
    cmd_reinterrupt: Option<(Instant, u32)>,
    /// When output held in memory only is written to the spool.
    spill_at: Option<Instant>,
    cleanup: Vec<Cleanup>,
    /// Its cgroup was empty when the process exited: its usage then is final.
    cgroup_empty: bool,
    /// Its cgroup held what the process left behind when it exited: watched, so that once it
    /// has emptied the KILL due after the grace period is dropped and the end comes now.
    emptying: Option<Arc<ProcCgroup>>,
}

/// Supervises process `p` until it has ended and all its output is in. Should the supervision
/// itself fail (a panic: a bug, never an I/O error, which every writer absorbs), the record
/// still reaches a final state and its tree is killed: nothing is left `running` with no one
/// watching it.
pub async fn supervise(job: Job, p: Writer, io: ChildIo, control: mpsc::Receiver<Control>) {
    let table = job.table.clone();
    let watched = AssertUnwindSafe(run(job, &p, io, control));
    if let Err(panic) = watched.catch_unwind().await {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        tracing::error!(id = p.id, "supervisor failed: {what}");
        exit::abandoned(&table, &p, &what);
    }
}

async fn run(job: Job, p: &Writer, io: ChildIo, mut control: mpsc::Receiver<Control>) {
    let mut s = Supervisor {
        table: job.table,
        grace: job.grace,
        p,
        stdout: io.stdout,
        stderr: io.stderr,
        exited: false,
        timeout_at: job.timeout.map(|t| Instant::now() + t),
        kill_at: job.kill_in.map(|k| Instant::now() + k),
        abandon_at: None,
        input_check_at: io.input.as_ref().map(|_| Instant::now() + input::QUIET),
        input: io.input,
        checks: 0,
        orphan: job.orphan,
        leftover: job.leftover,
        route: job.route,
        cmd_kill_at: None,
        cmd_reinterrupt: None,
        cmd_abandon_at: None,
        spill_at: None,
        cleanup: job.cleanup,
        cgroup_empty: false,
        emptying: None,
    };
    let mut exit = Some(io.exit);
    let mut out_buf = vec![0u8; READ_BUF_MIN];
    let mut err_buf = vec![0u8; READ_BUF_MIN];
    let mut timer = timers::Timer::new();
    // From here on the notes of other threads (refused execs, questions) wait for this loop.
    s.p.supervised();
    // A pending KILL keeps the loop too: what the process left behind may have closed its
    // pipes and still be shrugging off the TERM.
    while !(s.exited && s.stdout.is_none() && s.stderr.is_none() && s.kill_at.is_none()) {
        let timed = timer.aim(s.next_deadline());
        tokio::select! {
            r = read_some(&mut s.stdout, &mut out_buf) => {
                s.took(Stream::Stdout, &r, &out_buf);
                grow(&mut out_buf, &r, &s.stdout);
                // A terminal gives at most a few KiB a read and is always readable under a
                // flood: other work (clients, timers) gets its turn after each read, and after
                // a full one the terminal waits a millisecond — the flooding program with it,
                // whose writes and the kernel's terminal work otherwise take the machine's
                // CPUs from every other client (docs/decisions.md, "Fairness").
                if matches!(s.stdout, Some(Source::Pty(_))) {
                    match r {
                        Ok(n) if n >= FLOOD_READ => tokio::time::sleep(FLOOD_PAUSE).await,
                        _ => tokio::task::yield_now().await,
                    }
                }
            }
            r = read_some(&mut s.stderr, &mut err_buf) => {
                s.took(Stream::Stderr, &r, &err_buf);
                grow(&mut err_buf, &r, &s.stderr);
            }
            status = async { exit.as_mut().expect("guarded by the branch condition").await },
                if exit.is_some() =>
            {
                exit = None;
                // A dropped sender means the reaper is gone: the daemon is going down.
                let status = status.unwrap_or(Exit::Signal(cuba_protocol::Signal::Kill.number()));
                s.settle(&mut out_buf).await;
                s.drain_now(&mut out_buf);
                s.on_exit(status);
                // Its waiters (a `run`'s reply) go first; the clean-up after them.
                tokio::task::yield_now().await;
            }
            empty = exit::emptied(s.emptying.clone()), if s.emptying.is_some() => {
                if empty {
                    // What was left ended on the TERM: no KILL to wait for.
                    s.emptying = None;
                    s.kill_at = None;
                }
            }
            _ = timer.fired(), if timed => s.due().await,
            () = s.p.noted() => {
                if s.p.take_notes() {
                    s.table.changed();
                }
            }
            _ = Orphan::exited(&s.orphan), if Orphan::watching(&s.orphan) => s.owner_gone(),
            Some(msg) = control.recv() => match msg {
                #[cfg(unix)]
                Control::Pause { reply, resume } => {
                    // An exit already delivered is handled now, not handed over.
                    if let Some(Ok(status)) = exit.as_mut().map(|rx| rx.try_recv()) {
                        exit = None;
                        s.drain_now(&mut out_buf);
                        s.on_exit(status);
                    }
                    let state = s.paused();
                    let paused = state.is_some();
                    if reply.send(state).is_ok() && paused {
                        let _ = resume.await;
                    }
                }
                msg => s.control(msg),
            },
        }
    }
    // The exit is published (and its waiters run): only now is the output stored, in one
    // journal line when it is short, else in the spool's files.
    if !s.table.keep_output(s.p) {
        s.p.spill().await;
    }
    s.empty_cgroup().await;
    s.finish();
}

impl Supervisor<'_> {
    /// What an in-place upgrade needs to carry this process on: `None` while it is ending
    /// (its exit is being handled) or is a session's shell running a command.
    #[cfg(unix)]
    fn paused(&self) -> Option<Paused> {
        let busy_session = self.route.as_ref().is_some_and(|r| r.current().is_some());
        if self.exited || busy_session || self.abandon_at.is_some() {
            return None;
        }
        let raw = |s: &Option<Source>| match s {
            Some(Source::Pipe(p)) => Some(std::os::fd::AsRawFd::as_raw_fd(p)),
            Some(Source::Pty(m)) => Some(m.raw()),
            None => None,
        };
        let now = Instant::now();
        Some(Paused {
            stdout: raw(&self.stdout),
            stderr: raw(&self.stderr),
            timeout_left: self.timeout_at.map(|t| t.saturating_duration_since(now)),
            kill_left: self.kill_at.map(|t| t.saturating_duration_since(now)),
        })
    }

    fn control(&mut self, msg: Control) {
        match msg {
            Control::Signal {
                id,
                signal,
                grace,
                stop,
            } if id != self.p.id => self.signal_command(id, signal, grace, stop),
            Control::Signal {
                signal,
                grace,
                stop,
                ..
            } => {
                if let Some(cause) = stop {
                    self.mark_stopped(cause);
                }
                self.signal(signal, grace);
            }
            #[cfg(unix)]
            Control::CommandTimeout(id) => self.command_timeout(id),
            Control::Input { id, eof, done } => {
                self.input_sent(id, eof);
                let _ = done.send(());
            }
            Control::Resize { size, done } => {
                let _ = done.send(self.resize(size));
            }
            // Handled in the loop, which can wait; answered here only for completeness.
            #[cfg(unix)]
            Control::Pause { reply, .. } => {
                let _ = reply.send(None);
            }
        }
    }

    fn took(&mut self, stream: Stream, r: &io::Result<usize>, buf: &[u8]) {
        let n = match *r {
            Ok(0) | Err(_) => {
                match stream {
                    Stream::Stdout => self.stdout = None,
                    Stream::Stderr => self.stderr = None,
                }
                if let Some(route) = self.route.as_mut() {
                    route.closed(self.p, stream);
                }
                return;
            }
            Ok(n) => n,
        };
        if let Some(route) = self.route.as_mut() {
            route.feed(self.p, stream, &buf[..n]);
            self.p.lock().last_output = std::time::Instant::now();
            self.p.notify();
            self.arm_spill();
            self.rearm_input_check();
            if self.route.as_ref().is_some_and(|r| r.current().is_none()) {
                // The command ended: its escalation timers go with it.
                self.cmd_kill_at = None;
                self.cmd_abandon_at = None;
                self.cmd_reinterrupt = None;
            }
            return;
        }
        let (was_waiting, unspooled) = {
            let mut rec = self.p.lock();
            rec.output.append(stream, &buf[..n]);
            let unspooled = rec.output.unspooled();
            if let Some(tty) = rec.tty.as_mut() {
                tty.screen.feed(&buf[..n]);
            }
            rec.last_output = std::time::Instant::now();
            (rec.moved_on(), unspooled)
        };
        self.p.notify();
        if unspooled && self.spill_at.is_none() {
            self.spill_at = Some(Instant::now() + SPILL_AFTER);
        }
        if was_waiting {
            self.table.changed();
        }
        self.rearm_input_check();
    }

    /// Reads what is already in the pipes without waiting (the exited process wrote it all).
    /// Reads what the pipes and the terminal hold now (bounded): the bytes taken.
    fn drain_now(&mut self, buf: &mut [u8]) -> usize {
        let mut taken = 0;
        for stream in [Stream::Stdout, Stream::Stderr] {
            let mut budget = DRAIN_LIMIT;
            while budget > 0 {
                let pipe = match stream {
                    Stream::Stdout => &self.stdout,
                    Stream::Stderr => &self.stderr,
                };
                let Some(p) = pipe.as_ref() else { break };
                match read_now(p, buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    r => {
                        let done = !matches!(r, Ok(n) if n > 0);
                        let n = *r.as_ref().unwrap_or(&0);
                        budget = budget.saturating_sub(n);
                        taken += n;
                        self.took(stream, &r, buf);
                        if done {
                            break;
                        }
                    }
                }
            }
        }
        taken
    }

    /// Output went to memory only: have it spooled shortly (the record's own, and in a
    /// session the running command's).
    fn arm_spill(&mut self) {
        if self.spill_at.is_some() {
            return;
        }
        let cmd = self.route.as_ref().and_then(|r| r.current());
        let unspooled =
            self.p.lock().output.unspooled() || cmd.is_some_and(|c| c.lock().output.unspooled());
        if unspooled {
            self.spill_at = Some(Instant::now() + SPILL_AFTER);
        }
    }
}
