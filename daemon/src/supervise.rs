//! The supervisor: one task per process that owns its output pipes, its timers and its stop
//! sequence. Output, exit, timeouts and control messages are all events in one `select!`.
//!
//! The exit is detected from the tracked process itself (its status from the reaper), not from
//! the pipes closing, so a grandchild holding a pipe cannot delay the report. Before the exit is
//! published, whatever the process left in its pipes is read, so even a 1 ms process has all of
//! its output in the record. Processes of the tree left behind are then stopped (TERM, grace,
//! KILL), and the pipes drained until they close.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::{ProcState, Signal, Stream};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, Instant};

use crate::daemon::{now_ms, Daemon};
use crate::journal::End;
use crate::proc::{Control, Proc, StopCause};
use crate::pty::Master;
use crate::reaper::Exit;
use crate::session::Router;
use crate::tree;

/// Read buffers start small (most processes print little, and a thousand idle ones must stay
/// cheap) and grow while reads fill them, up to the pipe size.
const READ_BUF_MIN: usize = 8 * 1024;
const READ_BUF_MAX: usize = 1024 * 1024;
/// After the exit, how long to wait for pipes held by processes outside our reach.
const ABANDON_AFTER: Duration = Duration::from_secs(1);
/// Most bytes read per stream at the exit: more than a pipe holds, so all the exited process
/// wrote, while a grandchild writing without pause cannot keep the loop going.
const DRAIN_LIMIT: usize = 4 * READ_BUF_MAX;
/// How long output must have been quiet (since the last output, a stdin write, or the start)
/// before the tree is checked for a process blocked reading its stdin.
pub const INPUT_QUIET: Duration = Duration::from_millis(150);
/// A check that finds nobody reading is repeated after doubling pauses (the process may reach
/// its `read` a little later), this many times, then not again until the next output or stdin
/// write: an idle process costs nothing.
const INPUT_CHECKS: u32 = 5;
/// [`spill`] on the blocking pool: the runtime thread is free meanwhile, so a waiter just woken
/// (the exit's reply) runs first instead of after the spool's files are made.
pub async fn spill_off_thread(p: Arc<Proc>) {
    let _ = tokio::task::spawn_blocking(move || spill(&p)).await;
}

/// How long new output may stay in memory only before it is written to the spool (see
/// `Output`): long enough that a short command's reply does not wait for the spool's files,
/// short enough that what a running process printed is on disk should the daemon die.
const SPILL_AFTER: Duration = Duration::from_millis(10);

/// Writes a record's in-memory output to its spool, without holding its lock while writing (the
/// caller is the task that appends to it, or it has ended, so nothing is appended meanwhile).
pub fn spill(p: &Proc) {
    let job = p.lock().output.take_spill();
    if let Some((mut spool, chunks)) = job {
        let failed = crate::output::write_all(&mut spool, &chunks).err();
        p.lock().output.end_spill(spool, failed);
    }
}

/// Where output comes from: a pipe (stdout, stderr), or a terminal's master end (both).
pub enum Source {
    Pipe(pipe::Receiver),
    Pty(Arc<Master>),
}

/// What a process waiting for input would be blocked reading.
pub enum InputTarget {
    /// The stdin pipe the daemon holds the write end of, by inode (both ends share it).
    Pipe(u64),
    /// The terminal: its foreground group reading it.
    Tty(Arc<Master>),
}

pub struct ChildIo {
    pub stdout: Source,
    /// `None` on a terminal: it has one output stream.
    pub stderr: Option<Source>,
    pub exit: oneshot::Receiver<Exit>,
    pub input: Option<InputTarget>,
}

async fn read_some(source: &mut Option<Source>, buf: &mut [u8]) -> io::Result<usize> {
    match source {
        Some(Source::Pipe(p)) => p.read(buf).await,
        Some(Source::Pty(m)) => m.read(buf).await,
        None => std::future::pending().await,
    }
}

/// A read on the source's fd, now. Not `try_read`: that returns `WouldBlock` without reading
/// until the runtime has seen the pipe become readable, which for a process that lived a
/// millisecond may not have happened yet when its exit arrives.
fn read_now(source: &Source, buf: &mut [u8]) -> io::Result<usize> {
    match source {
        Source::Pipe(p) => crate::fd::read(p, buf),
        Source::Pty(m) => m.read_now(buf),
    }
}

async fn at(deadline: Option<Instant>) {
    match deadline {
        Some(d) => sleep_until(d).await,
        None => std::future::pending().await,
    }
}

struct Supervisor {
    d: Arc<Daemon>,
    p: Arc<Proc>,
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
    /// A session's shell: routes output to the running command (`session.rs`).
    router: Option<Router>,
    /// An interrupted session command that has not ended: SIGKILL below the shell at
    /// `cmd_kill_at`, and the session stopped at `cmd_abandon_at` if even that did not end it.
    cmd_kill_at: Option<Instant>,
    cmd_abandon_at: Option<Instant>,
    /// When output held in memory only is written to the spool.
    spill_at: Option<Instant>,
}

pub async fn supervise(
    d: Arc<Daemon>,
    p: Arc<Proc>,
    io: ChildIo,
    mut control: mpsc::Receiver<Control>,
    timeout: Option<Duration>,
    router: Option<Router>,
) {
    let mut s = Supervisor {
        d,
        p,
        stdout: Some(io.stdout),
        stderr: io.stderr,
        exited: false,
        timeout_at: timeout.map(|t| Instant::now() + t),
        kill_at: None,
        abandon_at: None,
        input_check_at: io.input.as_ref().map(|_| Instant::now() + INPUT_QUIET),
        input: io.input,
        checks: 0,
        router,
        cmd_kill_at: None,
        cmd_abandon_at: None,
        spill_at: None,
    };
    let mut exit = Some(io.exit);
    let mut out_buf = vec![0u8; READ_BUF_MIN];
    let mut err_buf = vec![0u8; READ_BUF_MIN];
    while !(s.exited && s.stdout.is_none() && s.stderr.is_none()) {
        tokio::select! {
            r = read_some(&mut s.stdout, &mut out_buf) => {
                s.took(Stream::Stdout, &r, &out_buf);
                grow(&mut out_buf, &r);
            }
            r = read_some(&mut s.stderr, &mut err_buf) => {
                s.took(Stream::Stderr, &r, &err_buf);
                grow(&mut err_buf, &r);
            }
            status = async { exit.as_mut().expect("guarded by the branch condition").await },
                if exit.is_some() =>
            {
                exit = None;
                // A dropped sender means the reaper is gone: the daemon is going down.
                let status = status.unwrap_or(Exit::Signal(libc::SIGKILL));
                s.drain_now(&mut out_buf);
                s.on_exit(status);
            }
            _ = at(s.timeout_at), if !s.exited && s.timeout_at.is_some() => {
                s.timeout_at = None;
                s.stop(StopCause::Timeout, Signal::Term, Some(s.d.config.grace));
            }
            _ = at(s.kill_at), if s.kill_at.is_some() => {
                s.kill_at = None;
                s.kill_now();
            }
            _ = at(s.abandon_at), if s.abandon_at.is_some() => {
                s.abandon_at = None;
                s.stdout = None;
                s.stderr = None;
            }
            _ = at(s.input_check_at), if !s.exited && s.input_check_at.is_some() => {
                s.input_check_at = None;
                s.check_input();
            }
            _ = at(s.spill_at), if s.spill_at.is_some() => {
                s.spill_at = None;
                spill_off_thread(s.p.clone()).await;
                if let Some(cmd) = s.router.as_ref().and_then(Router::current) {
                    spill_off_thread(cmd).await;
                }
            }
            _ = at(s.cmd_kill_at), if s.cmd_kill_at.is_some() => {
                s.cmd_kill_at = None;
                s.kill_command();
            }
            _ = at(s.cmd_abandon_at), if s.cmd_abandon_at.is_some() => {
                s.cmd_abandon_at = None;
                s.abandon_command();
            }
            Some(msg) = control.recv() => match msg {
                Control::Signal { id, signal, grace } if id != s.p.id => {
                    s.signal_command(id, signal, grace);
                }
                Control::Signal { signal, grace, .. } => s.signal(signal, grace),
                Control::CommandTimeout(id) => s.command_timeout(id),
                Control::InputSent => s.rearm_input_check(),
            },
        }
    }
    // The exit is published (and its waiters run): only now are the spool's files made.
    spill_off_thread(s.p.clone()).await;
    s.finish();
}

/// A read that filled the buffer suggests a fast writer: a bigger buffer halves the wake-ups.
fn grow(buf: &mut Vec<u8>, r: &io::Result<usize>) {
    if matches!(r, Ok(n) if *n == buf.len()) && buf.len() < READ_BUF_MAX {
        buf.resize(buf.len() * 4, 0);
    }
}

impl Supervisor {
    fn took(&mut self, stream: Stream, r: &io::Result<usize>, buf: &[u8]) {
        match *r {
            Ok(0) | Err(_) => {
                match stream {
                    Stream::Stdout => self.stdout = None,
                    Stream::Stderr => self.stderr = None,
                }
                if let Some(router) = self.router.as_mut() {
                    router.closed(&self.d, &self.p, stream);
                }
            }
            Ok(n) if self.router.is_some() => {
                if let Some(router) = self.router.as_mut() {
                    router.feed(&self.d, &self.p, stream, &buf[..n]);
                }
                self.p.lock().last_output = std::time::Instant::now();
                self.p.notify();
                self.arm_spill();
                self.rearm_input_check();
                if self.router.as_ref().is_some_and(|r| r.current().is_none()) {
                    // The command ended: its escalation timers go with it.
                    self.cmd_kill_at = None;
                    self.cmd_abandon_at = None;
                }
            }
            Ok(n) => {
                let (was_waiting, unspooled) = {
                    let mut d = self.p.lock();
                    d.output.append(stream, &buf[..n]);
                    let unspooled = d.output.unspooled();
                    if let Some(tty) = d.tty.as_mut() {
                        tty.screen.feed(&buf[..n]);
                    }
                    d.last_output = std::time::Instant::now();
                    let waiting = d.info.state == ProcState::WaitingInput;
                    if waiting {
                        d.info.state = ProcState::Running;
                    }
                    (waiting, unspooled)
                };
                self.p.notify();
                if unspooled && self.spill_at.is_none() {
                    self.spill_at = Some(Instant::now() + SPILL_AFTER);
                }
                if was_waiting {
                    self.d.table_changed();
                }
                self.rearm_input_check();
            }
        }
    }

    /// Reads what is already in the pipes without waiting (the exited process wrote it all).
    fn drain_now(&mut self, buf: &mut [u8]) {
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
                        budget = budget.saturating_sub(*r.as_ref().unwrap_or(&0));
                        self.took(stream, &r, buf);
                        if done {
                            break;
                        }
                    }
                }
            }
        }
    }

    fn on_exit(&mut self, status: Exit) {
        tracing::debug!(id = self.p.id, ?status, "exited");
        self.exited = true;
        let end = {
            let mut d = self.p.lock();
            let stop = d.stop;
            let info = &mut d.info;
            info.ended_at_ms = Some(now_ms());
            match status {
                Exit::Code(code) => info.exit_code = Some(code),
                Exit::Signal(sig) => info.signal = Some(Signal::from_number(sig)),
            }
            info.state = match (stop, status) {
                (Some(StopCause::Timeout), _) => ProcState::TimedOut,
                (Some(StopCause::Request | StopCause::Shutdown), _) => ProcState::Killed,
                (None, Exit::Code(_)) => ProcState::Exited,
                (None, Exit::Signal(_)) => ProcState::Signaled,
            };
            d.stdin = None;
            End {
                id: self.p.id,
                state: d.info.state,
                exit_code: d.info.exit_code,
                signal: d.info.signal,
                error: d.info.error.clone(),
                ended_at_ms: d.info.ended_at_ms.unwrap_or(0),
                stdout_bytes: d.output.stdout_bytes,
                stderr_bytes: d.output.stderr_bytes,
            }
        };
        self.d.journal.ended(end);
        self.d.audit.ended(&self.p.info());
        if let Some(router) = self.router.as_mut() {
            router.shell_ended(&self.d, &self.p);
            self.cmd_kill_at = None;
            self.cmd_abandon_at = None;
        }
        self.p.notify();
        self.d.table_changed();
        // Whatever of the tree is left behind is stopped too: nothing leaks. Most processes
        // leave nothing, and two cheap checks say so without scanning /proc.
        let root = self.p.lock().root.clone();
        let left = match root {
            Some(root) if tree::may_have_leftovers(&root, &self.d.scope()) => {
                self.signal_tree(libc::SIGTERM)
            }
            _ => 0,
        };
        if left > 0 {
            tracing::debug!(
                id = self.p.id,
                left,
                "stopping what the process left behind"
            );
            self.kill_at = Some(Instant::now() + self.d.config.grace);
            self.abandon_at = Some(Instant::now() + self.d.config.grace + ABANDON_AFTER);
        } else {
            self.abandon_at = Some(Instant::now() + ABANDON_AFTER);
        }
    }

    /// Output went to memory only: have it spooled shortly (the record's own, and in a
    /// session the running command's).
    fn arm_spill(&mut self) {
        if self.spill_at.is_some() {
            return;
        }
        let cmd = self.router.as_ref().and_then(Router::current);
        let unspooled =
            self.p.lock().output.unspooled() || cmd.is_some_and(|c| c.lock().output.unspooled());
        if unspooled {
            self.spill_at = Some(Instant::now() + SPILL_AFTER);
        }
    }

    /// Output or a stdin write: the quiet period starts again.
    fn rearm_input_check(&mut self) {
        if self.input.is_some() && !self.exited {
            self.checks = 0;
            self.input_check_at = Some(Instant::now() + INPUT_QUIET);
        }
    }

    /// Output has been quiet: is a process of the tree blocked reading the stdin pipe we hold,
    /// or (on a terminal) a process of the foreground group blocked reading the terminal?
    fn check_input(&mut self) {
        let Some(input) = self.input.as_ref() else {
            return;
        };
        // In a session, the command running is what waits (the shell waiting for the next
        // command between them is not news).
        let target = match &self.router {
            Some(router) => match router.current() {
                Some(cmd) => cmd,
                None => return,
            },
            None => self.p.clone(),
        };
        let root = self.p.lock().root.clone();
        let (open, state) = {
            let d = target.lock();
            (d.stdin.is_some(), d.info.state)
        };
        // Nobody can answer once stdin is closed; already reported: nothing to do.
        let Some(root) = root.filter(|_| open && state == ProcState::Running) else {
            return;
        };
        let reader = match input {
            InputTarget::Pipe(ino) => tree::reading_pipe(&root, &self.d.scope(), *ino),
            InputTarget::Tty(master) => master
                .foreground()
                .and_then(|fg| tree::reading_tty(&root, &self.d.scope(), &master.path, fg)),
        };
        match reader {
            Some(pid) => {
                let changed = {
                    let mut d = target.lock();
                    let quiet = d.last_output.elapsed() >= INPUT_QUIET;
                    let now = d.info.state == ProcState::Running && d.stdin.is_some() && quiet;
                    if now {
                        d.info.state = ProcState::WaitingInput;
                    }
                    now
                };
                if changed {
                    tracing::debug!(id = target.id, pid, "waiting for input");
                    target.notify();
                    self.d.table_changed();
                } else {
                    self.rearm_input_check();
                }
            }
            None if self.checks + 1 < INPUT_CHECKS => {
                self.checks += 1;
                self.input_check_at = Some(Instant::now() + INPUT_QUIET * (1 << self.checks));
            }
            None => {}
        }
    }

    /// A signal for the command running in this session's shell. Ending signals interrupt it
    /// as Ctrl-C would (SIGINT to the shell's group: the shell's trap ends the command, the
    /// session stays); others go to the processes below the shell.
    fn signal_command(&mut self, id: u64, signal: Signal, grace: Option<Duration>) {
        let current = self.router.as_ref().and_then(Router::current);
        if current.is_none_or(|c| c.id != id) {
            return;
        }
        match signal {
            Signal::Kill => {
                self.signal_below_shell(libc::SIGKILL);
                self.cmd_abandon_at = Some(Instant::now() + ABANDON_AFTER);
            }
            Signal::Term | Signal::Int | Signal::Hup | Signal::Quit => {
                self.signal_tree(libc::SIGINT);
                if let Some(grace) = grace {
                    self.cmd_kill_at = Some(Instant::now() + grace);
                }
            }
            other => {
                self.signal_below_shell(other.number());
            }
        }
    }

    fn command_timeout(&mut self, id: u64) {
        let Some(cmd) = self.router.as_ref().and_then(Router::current) else {
            return;
        };
        if cmd.id != id {
            return;
        }
        cmd.lock().stop.get_or_insert(StopCause::Timeout);
        self.signal_command(id, Signal::Int, Some(self.d.config.grace));
    }

    /// The grace period of an interrupted command is over: SIGKILL what runs below the shell.
    fn kill_command(&mut self) {
        if self.router.as_ref().and_then(Router::current).is_some() {
            self.signal_below_shell(libc::SIGKILL);
            self.cmd_abandon_at = Some(Instant::now() + ABANDON_AFTER);
        }
    }

    /// Even SIGKILL below the shell did not end the command: the shell itself is stuck in it.
    /// The session is stopped; the next command starts a new one.
    fn abandon_command(&mut self) {
        if self.router.as_ref().and_then(Router::current).is_some() {
            tracing::debug!(
                id = self.p.id,
                "session shell stuck in a command: stopping it"
            );
            self.stop(StopCause::Request, Signal::Kill, None);
        }
    }

    fn signal_below_shell(&self, signal: i32) -> usize {
        let root = self.p.lock().root.clone();
        match root {
            Some(root) => tree::signal_descendants(&root, signal, &self.d.scope()),
            None => 0,
        }
    }

    fn signal_tree(&self, signal: i32) -> usize {
        let root = self.p.lock().root.clone();
        match root {
            Some(root) => tree::signal_tree(&root, signal, Some(&self.d.scope())),
            None => 0,
        }
    }

    fn kill_now(&mut self) {
        let root = self.p.lock().root.clone();
        if let Some(root) = root {
            let n = tree::kill_tree(&root, Some(&self.d.scope()));
            tracing::debug!(id = self.p.id, killed = n, "grace period over: SIGKILL");
        }
    }

    fn stop(&mut self, cause: StopCause, signal: Signal, grace: Option<Duration>) {
        {
            let mut d = self.p.lock();
            if d.stop.is_none() && !d.finished() {
                d.stop = Some(cause);
            }
        }
        self.signal(signal, grace);
    }

    fn signal(&mut self, signal: Signal, grace: Option<Duration>) {
        if signal == Signal::Kill {
            self.kill_now();
            return;
        }
        self.signal_tree(signal.number());
        if let Some(grace) = grace {
            let at = Instant::now() + grace;
            self.kill_at = Some(self.kill_at.map_or(at, |k| k.min(at)));
        }
    }

    fn finish(&mut self) {
        // ---- resource limits (limits.rs): the per-process cgroup goes with the process.
        self.d.limits.release(self.p.id);
        // ---- end resource limits

        {
            let mut d = self.p.lock();
            d.drained = true;
            d.control = None;
            if let Some(tty) = d.tty.as_mut() {
                tty.master = None;
            }
        }
        let script = crate::spawn::script_path(&self.d.config, self.p.id);
        if let Err(e) = std::fs::remove_file(&script) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!("cannot remove {}: {e}", script.display());
            }
        }
        self.p.notify();
        self.d.table_changed();
    }
}
