//! A row to be: what a new record says before its process exists, on every OS.

use std::path::Path;
use std::sync::Arc;

use cuba_protocol::{now_ms, Owner, ProcKind, ProcState, ProcessInfo, SpawnRequest, TtySize};

use crate::state::tokens::Stamp;

/// A row to be: what a new record says before its process exists.
#[derive(Debug, Clone)]
pub struct NewRecord {
    pub owner: Owner,
    pub name: Option<String>,
    pub command: String,
    pub cwd: String,
    pub timeout_ms: Option<u64>,
    pub kind: ProcKind,
    pub tty: Option<TtySize>,
    pub session: Option<String>,
    /// The request token of the request that makes it.
    pub token: Option<Stamp>,
    /// The confined caller it is started for (see `Caller::tenant`).
    pub tenant: Option<Arc<str>>,
    /// The TCP port leased to it (see `processes::leases`).
    pub port: Option<u16>,
}

impl NewRecord {
    /// The row of a command `req` from `owner`, to run in `cwd`.
    pub fn of(owner: Owner, req: &SpawnRequest, cwd: &Path) -> NewRecord {
        NewRecord {
            owner,
            name: req.name.clone(),
            command: req.command.clone(),
            cwd: cwd.display().to_string(),
            timeout_ms: req.timeout_ms,
            kind: ProcKind::Command,
            tty: req.tty,
            session: req.session.clone(),
            token: Stamp::of_spawn(req),
            tenant: None,
            port: None,
        }
    }

    /// Its row as record `id`: the request's facts, running, nothing measured yet.
    pub fn row(self, id: u64) -> ProcessInfo {
        let new = self;
        ProcessInfo {
            id,
            pid: 0,
            owner: new.owner,
            name: new.name,
            command: new.command,
            cwd: new.cwd,
            state: ProcState::Running,
            exit_code: None,
            signal: None,
            error: None,
            started_at_ms: now_ms(),
            ended_at_ms: None,
            timeout_ms: new.timeout_ms,
            stdout_bytes: 0,
            stderr_bytes: 0,
            dropped_bytes: 0,
            kind: new.kind,
            tty: new.tty,
            session: new.session,
            notice: None,
            spool: None,
            cpu_ms: None,
            memory_bytes: None,
            memory_peak_bytes: None,
            pids_max: None,
            forks_refused: None,
            cpu_millicores: None,
            blocked: Vec::new(),
            failure: None,
            asks: Vec::new(),
            port: new.port,
            errors: None,
            budget: None,
            budget_hit: None,
        }
    }
}
