//! The audit log: one JSON line per policy decision on a spawn and per process end, appended
//! to `<state_dir>/audit.jsonl` (and copied to stderr with `CUBA_EXEC_AUDIT=1`).
//!
//! A std `Mutex<File>`: a line is one `write_all` under the lock, never held across an
//! `.await`, so lines from concurrent spawns never interleave.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use cuba_protocol::{ClientInfo, PolicyDecision, ProcessInfo};
use serde_json::{json, Value};

use crate::daemon::now_ms;

pub struct Audit {
    path: PathBuf,
    stderr: bool,
    /// Opened on the first line, so a daemon that never spawns writes no file.
    file: Mutex<Option<File>>,
}

impl Audit {
    pub fn new(path: PathBuf, stderr: bool) -> Audit {
        Audit {
            path,
            stderr,
            file: Mutex::new(None),
        }
    }

    /// A spawn the policy refused.
    pub fn refused(&self, client: &ClientInfo, command: &str, cwd: &str, d: &PolicyDecision) {
        self.write(json!({
            "ts": now_ms(),
            "event": "spawn",
            "client": client.name,
            "peer_pid": client.pid,
            "command": command,
            "cwd": cwd,
            "decision": "refused",
            "rule": d.rule,
            "offending": d.offending,
            "id": Value::Null,
            "pid": Value::Null,
        }));
    }

    /// A spawn the policy allowed (the process may still have failed to start).
    pub fn allowed(&self, client: &ClientInfo, info: &ProcessInfo) {
        self.write(json!({
            "ts": now_ms(),
            "event": "spawn",
            "client": client.name,
            "peer_pid": client.pid,
            "command": info.command,
            "cwd": info.cwd,
            "decision": "allowed",
            "rule": Value::Null,
            "id": info.id,
            "pid": info.pid,
            "state": info.state.as_str(),
        }));
    }

    /// A process's end.
    pub fn ended(&self, info: &ProcessInfo) {
        self.write(json!({
            "ts": now_ms(),
            "event": "end",
            "client": info.owner.name,
            "peer_pid": info.owner.pid,
            "command": info.command,
            "cwd": info.cwd,
            "decision": "allowed",
            "rule": Value::Null,
            "id": info.id,
            "pid": info.pid,
            "state": info.state.as_str(),
            "exit": info.exit_code,
            "signal": info.signal.map(|s| format!("{s:?}")),
            "ms": info.elapsed_ms(now_ms()),
        }));
    }

    fn write(&self, line: Value) {
        let mut text = line.to_string();
        text.push('\n');
        if self.stderr {
            eprint!("cubad audit: {text}");
        }
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if file.is_none() {
            match OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
            {
                Ok(f) => *file = Some(f),
                Err(e) => {
                    tracing::warn!("cannot open the audit log {}: {e}", self.path.display());
                    return;
                }
            }
        }
        if let Some(f) = file.as_mut() {
            if let Err(e) = f.write_all(text.as_bytes()) {
                tracing::warn!("cannot write the audit log {}: {e}", self.path.display());
            }
        }
    }
}
