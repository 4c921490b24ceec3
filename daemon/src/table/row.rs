//! A new record's row: the request's facts, running, nothing measured yet.

use cuba_protocol::{now_ms, ProcState, ProcessInfo};

use super::NewRecord;

pub(super) fn row(id: u64, new: NewRecord) -> ProcessInfo {
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
    }
}
