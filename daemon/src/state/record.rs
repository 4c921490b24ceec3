//! One entry of the process table: its row, its output, and the handles that steer it.
//!
//! Shared between the supervisor task that owns the child (`supervise/`) and the request
//! handlers that read it. Every change (output, state) bumps a `watch` channel, so waiters and
//! followers wake on events instead of polling.
//!
//! Who writes a record: whoever holds its [`Writer`], made with it and never cloned. The code
//! that creates a record fills it in (the launch, a session starting a command in its shell,
//! the adoption of a handed-over process) and moves the writer into the task that owns the
//! process (its supervisor, a held command's wait for approval, a session); everyone else
//! reads through [`Proc::lock`], which gives no `&mut`. Requests reach a running record as
//! [`Control`] messages; what other threads find (a refused exec, a question to the person)
//! as [`Note`]s, which the supervisor applies between two of its events (`note.rs`).

mod control;
mod life;
mod note;
mod outcome;

pub use control::{Control, StdinMsg, StopCause};
#[cfg(unix)]
pub use control::{Paused, StdinPaused};
pub use life::Life;
pub use note::Note;
pub use outcome::Outcome;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cuba_protocol::{ProcState, ProcessInfo, TtySize};
use tokio::sync::{mpsc, watch};

use crate::base::policy::Effective;
use crate::parts::cpu_rate::Reading;
use crate::parts::output::Output;
use crate::parts::terminal::{Master, Screen};
use crate::parts::tree::TreeRoot;
use crate::platform::cgroup::ProcCgroup;
use crate::state::tokens::Stamp;

pub struct ProcData {
    /// Its row as last rendered; state, exit status and end come from `life`.
    info: ProcessInfo,
    life: Life,
    pub output: Output,
    /// All output is collected: the pipes closed (or were abandoned after the exit).
    pub drained: bool,
    pub last_output: Instant,
    pub stdin: Option<mpsc::Sender<StdinMsg>>,
    pub control: Option<mpsc::Sender<Control>>,
    pub root: Option<TreeRoot>,
    /// Its cgroup, when it has one: exact stop, CPU and memory.
    pub cgroup: Option<Arc<ProcCgroup>>,
    pub stop: Option<StopCause>,
    /// The terminal of a PTY process: its master end and the screen rendered from its output.
    pub tty: Option<TtyData>,
    /// The policy of the client that started it: a connection from inside its tree is held to
    /// it (`caller::ancestry`). `None` for records restored from the journal.
    pub policy: Option<Arc<Effective>>,
    /// What its policy check could not resolve before run time (`?(…)`): named in the audit.
    pub unresolved: Vec<String>,
    /// The request token it was started with (journalled, so a retry finds it after a
    /// restart).
    pub token: Option<Stamp>,
    /// The confined caller (a narrowed client or token) that started it, whose records only
    /// that caller reaches; `None`: started by an unconfined one, in the shared table.
    pub tenant: Option<Arc<str>>,
    /// The listener of its tree's exec checks, once the child has sent it: kept open across
    /// an upgrade, which hands it to the new program.
    #[cfg(unix)]
    pub exec_listener: Option<Arc<std::os::fd::OwnedFd>>,
    /// The Unix socket rule of its tree (a sandboxed one's), with the sockets the tree made:
    /// shared with the judge of its exec checks, carried across an upgrade.
    #[cfg(unix)]
    pub sockets: Option<Arc<crate::parts::unix_sockets::Sockets>>,
    /// The `ask` rules a person approved for this command: its own execs of them are not asked
    /// about again.
    pub approved_rules: Vec<String>,
}

/// See [`Proc::own_follower`].
pub struct OwnFollower(Arc<Proc>);

impl Drop for OwnFollower {
    fn drop(&mut self) {
        self.0
            .own_followers
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

pub struct TtyData {
    /// Dropped when the process is done, so an ended record holds no terminal.
    pub master: Option<Arc<Master>>,
    pub screen: Screen,
}

pub struct Proc {
    pub id: u64,
    /// std Mutex: held for short, non-async sections only (an append, a bounded read).
    data: Mutex<ProcData>,
    /// What reading its row last measured: a reader's memo beside the record, so that a read
    /// never writes the record (the supervisor is its one writer).
    reading: Mutex<Reading>,
    changed: watch::Sender<()>,
    /// When a client last read its output, waited on it, wrote to it or looked at its screen
    /// (`None`: not since it started): the clock of `unwatched_timeout`. A reader's memo
    /// beside the record, like `reading`.
    seen: Mutex<Option<Instant>>,
    /// Of its followers, those in its own tree: they do not count as someone attending.
    own_followers: std::sync::atomic::AtomicUsize,
    inbox: Mutex<note::Inbox>,
    /// Woken when a note waits for the supervisor.
    noted: tokio::sync::Notify,
}

/// The one right to change a record: made with it, held by its creator while it fills the
/// record in, then moved into the task that owns the process (its supervisor, a held command's
/// wait for approval, a session). Not `Clone`: a record has one writer, and everyone else
/// reads it through [`Proc::lock`].
pub struct Writer(Arc<Proc>);

impl Writer {
    /// The record, to write.
    pub fn lock(&self) -> MutexGuard<'_, ProcData> {
        self.0.data()
    }

    /// The shared record, for readers.
    pub fn proc(&self) -> &Arc<Proc> {
        &self.0
    }
}

impl std::ops::Deref for Writer {
    type Target = Proc;
    fn deref(&self) -> &Proc {
        &self.0
    }
}

/// A record locked for reading: its fields, not theirs to change.
pub struct Read<'a>(MutexGuard<'a, ProcData>);

impl std::ops::Deref for Read<'_> {
    type Target = ProcData;
    fn deref(&self) -> &ProcData {
        &self.0
    }
}

impl Proc {
    /// A new record, and the one right to write it.
    pub fn create(data: ProcData) -> (Arc<Proc>, Writer) {
        let p = Arc::new(Proc {
            id: data.info.id,
            data: Mutex::new(data),
            reading: Mutex::default(),
            changed: watch::Sender::new(()),
            seen: Mutex::default(),
            own_followers: Default::default(),
            inbox: Mutex::default(),
            noted: tokio::sync::Notify::new(),
        });
        (p.clone(), Writer(p))
    }

    /// The record, to read (short, non-async sections only).
    pub fn lock(&self) -> Read<'_> {
        Read(self.data())
    }

    fn data(&self) -> MutexGuard<'_, ProcData> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A receiver that wakes on every later change.
    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    /// A client attended to it now (a read, a wait, input, its screen).
    pub fn seen(&self) {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// When a client last attended to it.
    pub fn last_seen(&self) -> Option<Instant> {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Clients following it now (a `tail -f`, an `attach`, a `wait`): its change subscribers.
    pub fn followers(&self) -> usize {
        let own = self
            .own_followers
            .load(std::sync::atomic::Ordering::Relaxed);
        self.changed.receiver_count().saturating_sub(own)
    }

    /// A follower from inside its own tree, for as long as the guard lives: not counted by
    /// [`Proc::followers`] (a command cannot keep itself from being stopped by following
    /// itself).
    pub fn own_follower(self: &Arc<Proc>) -> OwnFollower {
        self.own_followers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        OwnFollower(self.clone())
    }

    pub fn notify(&self) {
        self.changed.send_replace(());
    }

    /// The row as clients see it, with live byte counts, and CPU and memory read from its
    /// cgroup while it runs (outside the lock: a few small files).
    pub fn info(&self) -> ProcessInfo {
        self.info_within(Duration::ZERO)
    }

    /// Its row for a listing: the cgroup's figures read again only if the last reading is
    /// older than the CPU rate's window, which keeps its rate as long. A listing looked at
    /// again soon (a watch, an agent polling) costs no file per row.
    pub fn listed(&self) -> ProcessInfo {
        self.info_within(crate::parts::cpu_rate::WINDOW)
    }

    /// Its row, with figures no older than `fresh`.
    fn info_within(&self, fresh: Duration) -> ProcessInfo {
        let now = Instant::now();
        let (mut info, live) = {
            let rec = self.lock();
            let live = rec.cgroup.clone().filter(|_| !rec.finished());
            (rec.snapshot(), live)
        };
        let Some(cg) = live else {
            return info;
        };
        let kept = self
            .reading()
            .usage
            .filter(|(at, _, _)| now.saturating_duration_since(*at) < fresh);
        if let Some((_, usage, rate)) = kept {
            set_usage(&mut info, usage);
            info.cpu_millicores = rate;
            return info;
        }
        let usage = cg.usage();
        set_usage(&mut info, usage);
        let mut reading = self.reading();
        if let Some(cpu_ms) = info.cpu_ms {
            let ran = Duration::from_millis(info.elapsed_ms(cuba_protocol::now_ms()));
            info.cpu_millicores = Some(reading.cpu.look(now, cpu_ms, ran));
        }
        reading.usage = Some((now, usage, info.cpu_millicores));
        info
    }

    fn reading(&self) -> MutexGuard<'_, Reading> {
        self.reading.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether it has ended and all its output is in.
    pub fn done(&self) -> bool {
        let rec = self.lock();
        rec.finished() && rec.drained
    }
}

/// The agent whose budget holds `cg`'s tree, and that budget's last hit while it ran, into
/// `info` (where there is one).
fn budget(info: &mut ProcessInfo, cg: Option<&crate::platform::cgroup::ProcCgroup>) {
    let Some(g) = cg.and_then(|c| c.agent()) else {
        return;
    };
    info.budget = Some(g.name().to_string());
    // Reached while it ran (the watch looks once a second: a second's slack).
    let (start, end) = (info.started_at_ms, info.ended_at_ms);
    let during = |at: u64| at + 2000 >= start && end.is_none_or(|e| at <= e + 2000);
    info.budget_hit = g.last_hit().filter(|h| during(h.at_ms)).map(|h| h.detail);
}

/// Puts the figures of a cgroup into a row (a figure not known keeps the row's).
pub fn set_usage(info: &mut ProcessInfo, u: crate::platform::cgroup::Usage) {
    info.cpu_ms = u.cpu_ms.or(info.cpu_ms);
    info.memory_bytes = u.memory_bytes.or(info.memory_bytes);
    info.memory_peak_bytes = u.memory_peak_bytes.or(info.memory_peak_bytes);
    info.pids_max = u.pids_max.or(info.pids_max);
    info.forks_refused = u.forks_refused.or(info.forks_refused);
}

impl ProcData {
    /// A record with no child attached (yet): `drained` for one restored from the journal.
    pub fn new(info: ProcessInfo, output: Output, drained: bool) -> ProcData {
        let life = Life::of_row(&info);
        let mut data = ProcData {
            info,
            life,
            output,
            drained,
            last_output: Instant::now(),
            stdin: None,
            control: None,
            root: None,
            cgroup: None,
            stop: None,
            tty: None,
            policy: None,
            unresolved: Vec::new(),
            token: None,
            tenant: None,
            #[cfg(unix)]
            exec_listener: None,
            #[cfg(unix)]
            sockets: None,
            approved_rules: Vec::new(),
        };
        data.render();
        data
    }

    /// A new record, its process not started yet.
    pub fn reserved(info: ProcessInfo, output: Output) -> ProcData {
        let mut data = ProcData::new(info, output, false);
        data.set_life(Life::Reserved);
        data
    }

    /// Its row as last rendered, without the live byte counts ([`ProcData::snapshot`] has
    /// them).
    pub fn info(&self) -> &ProcessInfo {
        &self.info
    }

    /// The pid of what runs it (a command in a session: its shell's).
    pub fn set_pid(&mut self, pid: u32) {
        self.info.pid = pid;
    }

    pub fn set_notice(&mut self, notice: Option<String>) {
        self.info.notice = notice;
    }

    pub fn set_tty_size(&mut self, size: TtySize) {
        self.info.tty = Some(size);
    }

    /// The figures of its cgroup (a figure not known keeps the row's).
    pub fn set_usage(&mut self, u: crate::platform::cgroup::Usage) {
        set_usage(&mut self.info, u);
    }

    /// What its cgroup counted to the end, read once it emptied: the final figures of use.
    pub fn set_final_usage(&mut self, last: crate::platform::cgroup::Usage) {
        let info = &mut self.info;
        info.cpu_ms = last.cpu_ms.or(info.cpu_ms);
        info.memory_peak_bytes = last.memory_peak_bytes.or(info.memory_peak_bytes);
        info.forks_refused = last.forks_refused.or(info.forks_refused);
    }

    pub fn snapshot(&self) -> ProcessInfo {
        let mut info = self.output.counted(self.info.clone());
        budget(&mut info, self.cgroup.as_deref());
        info
    }

    /// Before it lets go of its cgroup: its agent, and its budget's last hit while it ran, stay
    /// in its row.
    pub fn keep_budget(&mut self) {
        budget(&mut self.info, self.cgroup.as_deref());
    }

    pub fn finished(&self) -> bool {
        matches!(self.life, Life::Ended(_))
    }

    /// All its output is in: nothing is appended any more, so the spool closes its files (a
    /// finished record holds no descriptor).
    pub fn set_drained(&mut self) {
        self.drained = true;
        self.output.seal();
    }

    /// Running, not yet known to wait for input, with its stdin open: someone could still
    /// answer it.
    pub fn can_wait_for_input(&self) -> bool {
        self.info.state == ProcState::Running && self.stdin.is_some()
    }

    /// It got something to react to (input, a new size, output): no longer waiting for
    /// input. Returns whether it was.
    pub fn moved_on(&mut self) -> bool {
        self.waiting_input(false)
    }
}

/// Writes a record's in-memory output to its spool, without holding its lock while writing (its
/// writer asked for it, and appends nothing meanwhile).
fn spill(p: &Proc) {
    let job = p.data().output.take_spill();
    if let Some((mut spool, chunks)) = job {
        crate::parts::output::write_all(&mut spool, &chunks);
        p.data().output.end_spill(spool);
    }
}

impl Writer {
    /// Its in-memory output written to its spool, on the blocking pool: the runtime thread is
    /// free meanwhile, so a waiter just woken (the exit's reply) runs first instead of after
    /// the spool's files are made. Awaited by its writer, which appends nothing meanwhile.
    pub fn spill(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let p = self.0.clone();
        async move {
            let _ = tokio::task::spawn_blocking(move || spill(&p)).await;
        }
    }

    /// The last write of an ended record whose output is all in: spooled, then drained (its
    /// files closed) and its waiters woken. Its writer may let go of it meanwhile.
    #[cfg(unix)]
    pub fn seal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (spill, p) = (self.spill(), self.0.clone());
        async move {
            spill.await;
            p.data().set_drained();
            p.notify();
        }
    }
}
