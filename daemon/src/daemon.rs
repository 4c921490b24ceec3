//! The daemon's shared state: configuration, the process table, and the services every handler
//! uses (reaper, journal). The table has one owner, a std Mutex never held across an await.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cuba_protocol::{ErrorKind, ProcState, ProtocolError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::journal::{Journal, Record};
use crate::proc::Proc;
use crate::reaper::Reaper;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub struct Table {
    pub procs: BTreeMap<u64, Arc<Proc>>,
    pub next_id: u64,
}

pub struct Daemon {
    pub config: Config,
    pub pid: u32,
    /// Distinguishes this state directory's processes from any other daemon's in markers.
    pub instance: String,
    pub started_at_ms: u64,
    pub reaper: Arc<Reaper>,
    pub journal: Journal,
    /// `audit.jsonl`: policy decisions and process ends.
    pub audit: crate::audit::Audit,
    /// rlimits and per-process cgroups (`limits.rs`), checked at start-up.
    pub limits: crate::limits::Limiter,
    pub clients: AtomicU32,
    pub shutdown: CancellationToken,
    /// Persistent shell sessions by name (`session.rs`).
    pub sessions: crate::session::Sessions,
    table: Mutex<Table>,
    table_changed: watch::Sender<()>,
}

impl Daemon {
    pub fn new(
        config: Config,
        instance: String,
        reaper: Arc<Reaper>,
        journal: Journal,
        table: Table,
    ) -> Daemon {
        let pid = std::process::id();
        Daemon {
            audit: crate::audit::Audit::new(
                config.state_dir.join("audit.jsonl"),
                config.audit_stderr,
                config.audit_max,
            ),
            limits: crate::limits::Limiter::default(),
            config,
            pid,
            instance,
            started_at_ms: now_ms(),
            reaper,
            journal,
            clients: AtomicU32::new(0),
            shutdown: CancellationToken::new(),
            sessions: crate::session::Sessions::default(),
            table: Mutex::new(table),
            table_changed: watch::Sender::new(()),
        }
    }

    /// Where escapees of a tree can be: children of the daemon (it is their subreaper) that
    /// are not the tracked processes themselves.
    pub fn scope(&self) -> crate::tree::Scope {
        let known = self
            .table()
            .procs
            .values()
            .filter_map(|p| {
                let d = p.lock();
                (!d.finished()).then_some(d.info.pid as i32)
            })
            .collect();
        crate::tree::Scope {
            parents: HashSet::from([self.pid as i32]),
            known,
        }
    }

    pub fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, id: u64) -> Result<Arc<Proc>, ProtocolError> {
        self.table().procs.get(&id).cloned().ok_or_else(|| {
            ProtocolError::new(
                ErrorKind::NotFound,
                format!("no process with id {id} (finished records are pruned after their TTL)"),
            )
        })
    }

    pub fn all(&self) -> Vec<Arc<Proc>> {
        self.table().procs.values().cloned().collect()
    }

    pub fn running(&self) -> Vec<Arc<Proc>> {
        self.all()
            .into_iter()
            .filter(|p| !p.lock().finished())
            .collect()
    }

    pub fn subscribe_table(&self) -> watch::Receiver<()> {
        self.table_changed.subscribe()
    }

    pub fn table_changed(&self) {
        self.table_changed.send_replace(());
    }

    /// The marker planted in process `id`'s environment.
    pub fn marker(&self, id: u64) -> String {
        format!("CUBA_EXEC_PROCESS={}.{id}", self.instance)
    }

    /// Live records as the journal keeps them (for compaction).
    pub fn records(&self) -> (BTreeMap<u64, Record>, u64) {
        let table = self.table();
        let records = table
            .procs
            .iter()
            .map(|(id, p)| {
                let d = p.lock();
                let rec = Record {
                    info: d.snapshot(),
                    start_time: d.root.as_ref().map_or(0, |r| r.start_time),
                    marker: self.marker(*id),
                };
                (*id, rec)
            })
            .collect();
        (records, table.next_id)
    }

    /// Removes finished records that ended more than `age` ago (all finished ones for zero),
    /// with their spools. Returns how many.
    pub fn prune(&self, age: Duration) -> u64 {
        let cutoff = now_ms().saturating_sub(age.as_millis() as u64);
        let removed: Vec<Arc<Proc>> = {
            let mut table = self.table();
            let ids: Vec<u64> = table
                .procs
                .iter()
                .filter(|(_, p)| {
                    let d = p.lock();
                    d.finished() && d.drained && d.info.ended_at_ms.is_none_or(|t| t <= cutoff)
                })
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| table.procs.remove(id)).collect()
        };
        if removed.is_empty() {
            return 0;
        }
        for p in &removed {
            let dir = crate::spawn::spool_dir(&self.config, p.id);
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("cannot remove {}: {e}", dir.display());
                }
            }
            // Wake followers and waiters: the record is gone.
            p.notify();
        }
        let ids = removed.iter().map(|p| p.id).collect();
        self.journal.pruned(ids, || self.records());
        self.table_changed();
        removed.len() as u64
    }

    pub fn count_running(&self) -> usize {
        self.table()
            .procs
            .values()
            .filter(|p| {
                matches!(
                    p.lock().info.state,
                    ProcState::Running | ProcState::WaitingInput
                )
            })
            .count()
    }
}
