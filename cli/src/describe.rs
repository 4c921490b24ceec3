//! How a process's state reads in sentences and table cells.

use cuba_protocol::{ProcKind, ProcState, ProcessInfo};

use crate::units;

/// The EXIT cell: the code, the signal that ended it, or `-` while running.
pub fn exit_cell(p: &ProcessInfo) -> String {
    match (p.exit_code, p.signal) {
        (Some(code), _) => code.to_string(),
        (None, Some(sig)) => sig.to_string(),
        _ => "-".to_string(),
    }
}

/// How it ended (or that it has not): `exited with code 3`, `killed by SIGTERM`, ….
pub fn outcome(p: &ProcessInfo) -> String {
    let how = match (p.exit_code, p.signal) {
        (Some(code), _) => format!("code {code}"),
        (None, Some(sig)) => sig.to_string(),
        _ => String::new(),
    };
    // The daemon's word on why, where it has one (an OOM kill, a session's shell that ended
    // under its command), as MCP replies give it.
    let why = |s: String| match &p.error {
        Some(e) => format!("{s}: {e}"),
        None => s,
    };
    match p.state {
        ProcState::Running => "is running".to_string(),
        ProcState::WaitingInput => "is waiting for input".to_string(),
        ProcState::AwaitingApproval => "awaits a person's approval".to_string(),
        ProcState::Denied => format!(
            "was not run: {}",
            p.error.as_deref().unwrap_or("it was denied")
        ),
        ProcState::Exited => why(format!("exited with {how}")),
        // One wording for a signal's death, whoever sent it (a Ctrl-C reaches a terminal's
        // process itself, a piped one's through the daemon).
        ProcState::Signaled => why(format!("was killed by {how}")),
        ProcState::Killed if p.signal.is_some() => why(format!("was killed by {how}")),
        ProcState::Killed => why(format!("was stopped on request and exited with {how}")),
        ProcState::TimedOut => format!("timed out and was stopped ({how})"),
        ProcState::FailedToStart => format!(
            "failed to start: {}",
            p.error.as_deref().unwrap_or("unknown reason")
        ),
        ProcState::Lost => format!(
            "was lost: {}",
            p.error
                .as_deref()
                .unwrap_or("the daemon that ran it is gone")
        ),
    }
}

/// `process 3 (web) exited with code 0 (ran 12s)`.
pub fn sentence(p: &ProcessInfo) -> String {
    sentence_with(p, &[])
}

/// [`sentence`] with more notes in the parentheses.
pub fn sentence_with(p: &ProcessInfo, notes: &[String]) -> String {
    let mut all = Vec::new();
    if let Some(end) = p.ended_at_ms {
        if p.state != ProcState::FailedToStart {
            all.push(format!(
                "ran {}",
                units::age(end.saturating_sub(p.started_at_ms))
            ));
        }
    }
    all.extend(notes.iter().cloned());
    let mut s = format!("process {}{} {}", p.id, label(p), outcome(p));
    if !all.is_empty() {
        s.push_str(&format!(" ({})", all.join("; ")));
    }
    s
}

/// ` (name)` when the process has one.
pub fn label(p: &ProcessInfo) -> String {
    p.name
        .as_deref()
        .map_or_else(String::new, |n| format!(" ({n})"))
}

/// The signal number that ended it, for `128 + n` exit codes.
pub fn signal_number(p: &ProcessInfo) -> Option<i32> {
    p.signal.map(|s| s.number())
}

/// The KIND cell of `ps`: `tty:120x40` for a process on a terminal, `session:dev` for the
/// shell of session `dev`, `in:dev` for a command run in it; `None` for a command on pipes.
pub fn kind_cell(p: &ProcessInfo) -> Option<String> {
    let session = p.session.as_deref().unwrap_or("?");
    match (p.kind, p.tty) {
        (ProcKind::Session, _) => Some(format!("session:{session}")),
        (ProcKind::InSession, _) => Some(format!("in:{session}")),
        (ProcKind::Command, Some(size)) => Some(format!("tty:{}x{}", size.cols, size.rows)),
        (ProcKind::Command, None) => None,
    }
}

/// What is said when `attach` or `run --tty` lets go of a process that runs on.
pub fn detached(id: u64) -> String {
    format!(
        "[detached; process {id} keeps running: `cubactl attach {id}` again, `cubactl kill {id}` \
         stops it]"
    )
}

/// The daemon's notices about how a spawn was carried out (a session started, or started again
/// with its state gone; its spool stopped on a full disk), as a note line for stderr.
pub fn notice(p: &ProcessInfo) -> Option<String> {
    let all: Vec<&str> = [p.notice.as_deref(), p.spool.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    (!all.is_empty()).then(|| format!("[{}]", all.join("; ")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use cuba_protocol::Signal;

    #[test]
    fn a_signal_death_reads_one_way_whoever_sent_it() {
        let mut p: ProcessInfo = serde_json::from_value(serde_json::json!({
            "id": 1, "pid": 2, "owner": {"kind": "Cli", "name": "cubactl", "pid": 3},
            "name": null, "command": "x", "cwd": "/", "state": "Signaled", "exit_code": null,
            "signal": "Int", "error": null, "started_at_ms": 0, "ended_at_ms": 1,
            "timeout_ms": null, "stdout_bytes": 0, "stderr_bytes": 0, "dropped_bytes": 0
        }))
        .unwrap();
        assert_eq!(outcome(&p), "was killed by SIGINT");
        p.state = ProcState::Killed;
        p.signal = Some(Signal::Int);
        assert_eq!(outcome(&p), "was killed by SIGINT");
    }

    #[test]
    fn the_daemons_reason_follows_how_it_ended() {
        let mut p: ProcessInfo = serde_json::from_value(serde_json::json!({
            "id": 1, "pid": 2, "owner": {"kind": "Cli", "name": "cubactl", "pid": 3},
            "name": null, "command": "x", "cwd": "/", "state": "Signaled", "exit_code": null,
            "signal": "Kill", "error": "killed by the kernel: out of memory (memory_max 32 MiB)",
            "started_at_ms": 0, "ended_at_ms": 1, "timeout_ms": null, "stdout_bytes": 0,
            "stderr_bytes": 0, "dropped_bytes": 0
        }))
        .unwrap();
        assert_eq!(
            outcome(&p),
            "was killed by SIGKILL: killed by the kernel: out of memory (memory_max 32 MiB)"
        );
        p.error = None;
        assert_eq!(outcome(&p), "was killed by SIGKILL");
    }
}
