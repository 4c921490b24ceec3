//! The process table: every record by id. A record is written by the threads of its process
//! (output, exit) and read by the requests; each change is published on its watch channel, so
//! waiters wake on events, not on a timer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use cuba_protocol::{ErrorKind, ProcState, ProcessInfo, ProtocolError};
use tokio::sync::watch;

use crate::output::Output;
use crate::platform::windows::conpty::Pty;
use crate::platform::windows::job::Job;
use crate::screen::Screen;

/// Why a tree was stopped: its final state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    Request,
    Timeout,
    Shutdown,
}

pub struct Data {
    pub info: ProcessInfo,
    pub output: Output,
    /// Every pipe closed (or abandoned after the exit): no more output comes.
    pub drained: bool,
    pub last_output: Instant,
    /// The last write to its stdin (or its start): with the last output, when it went quiet.
    pub last_input: Instant,
    /// Writes to its stdin: bytes, or `None` to close it (a bounded queue).
    pub stdin: Option<std::sync::mpsc::SyncSender<Option<Vec<u8>>>>,
    /// Its tree; dropped (and so killed) when the record is pruned.
    pub job: Option<Arc<Job>>,
    pub stop: Option<Stop>,
    /// The pseudo console of a `tty` command (closed at its exit), and the screen rendered
    /// from its output.
    pub pty: Option<Arc<Mutex<Pty>>>,
    pub screen: Option<Screen>,
}

impl Data {
    pub fn finished(&self) -> bool {
        self.info.state.is_finished()
    }

    /// It got something to react to (input, output): no longer waiting for input.
    pub fn moved_on(&mut self) {
        if self.info.state == ProcState::WaitingInput {
            self.info.state = ProcState::Running;
        }
    }

    /// All its output is in: the spool closes its files.
    pub fn set_drained(&mut self) {
        self.drained = true;
        self.output.seal();
    }

    /// The row as clients see it, with live byte counts.
    pub fn snapshot(&self) -> ProcessInfo {
        self.output.counted(self.info.clone())
    }
}

/// Puts its job's CPU time and peak memory into a row (as they are: a query that fails leaves
/// the row's).
pub fn set_usage(info: &mut ProcessInfo, job: &Job) {
    if let Ok(usage) = job.usage() {
        info.cpu_ms = Some(usage.cpu_ns / 1_000_000);
        info.memory_peak_bytes = Some(usage.peak_memory).filter(|&b| b > 0);
    }
}

pub struct Rec {
    pub id: u64,
    /// std Mutex: held for short sections only, from threads and tasks alike.
    data: Mutex<Data>,
    changed: watch::Sender<()>,
}

impl Rec {
    pub fn lock(&self) -> MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    pub fn notify(&self) {
        self.changed.send_replace(());
    }

    /// Its row, with the job's CPU time and peak memory while it runs.
    pub fn info(&self) -> ProcessInfo {
        let (mut info, job) = {
            let d = self.lock();
            (d.snapshot(), d.job.clone().filter(|_| !d.finished()))
        };
        if let Some(job) = job {
            set_usage(&mut info, &job);
        }
        info
    }
}

#[derive(Default)]
pub struct Table {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    procs: BTreeMap<u64, Arc<Rec>>,
}

impl Table {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a record made from its id; `None` when `max` processes run already.
    pub fn insert(&self, max: usize, make: impl FnOnce(u64) -> Data) -> Option<Arc<Rec>> {
        let mut t = self.lock();
        let running = t.procs.values().filter(|p| !p.lock().finished()).count();
        if running >= max {
            return None;
        }
        t.next_id += 1;
        let id = t.next_id;
        let rec = Arc::new(Rec {
            id,
            data: Mutex::new(make(id)),
            changed: watch::Sender::new(()),
        });
        t.procs.insert(id, rec.clone());
        Some(rec)
    }

    pub fn get(&self, id: u64) -> Result<Arc<Rec>, ProtocolError> {
        self.lock().procs.get(&id).cloned().ok_or_else(|| {
            ProtocolError::new(
                ErrorKind::NotFound,
                format!("no process with id {id} (finished records are pruned after their TTL)"),
            )
        })
    }

    pub fn all(&self) -> Vec<Arc<Rec>> {
        self.lock().procs.values().cloned().collect()
    }

    /// Removes finished records whose output is all in, and those past `ttl`, keeping the
    /// newest `keep` finished ones; returns the ids that went.
    pub fn prune(&self, all: bool, ttl: std::time::Duration, keep: usize) -> Vec<u64> {
        let now = cuba_protocol::now_ms();
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let mut t = self.lock();
        let finished: Vec<u64> = t
            .procs
            .values()
            .filter(|p| {
                let d = p.lock();
                d.finished() && d.drained
            })
            .map(|p| p.id)
            .collect();
        let extra = finished.len().saturating_sub(keep);
        let mut gone = Vec::new();
        for (i, id) in finished.iter().enumerate() {
            let old = t.procs.get(id).is_some_and(|p| {
                let ended = p.lock().info.ended_at_ms.unwrap_or(now);
                now.saturating_sub(ended) >= ttl_ms
            });
            if all || old || i < extra {
                if t.procs.remove(id).is_some() {
                    gone.push(*id);
                }
            }
        }
        gone
    }

    pub fn running(&self) -> usize {
        self.lock()
            .procs
            .values()
            .filter(|p| !p.lock().finished())
            .count()
    }
}
