//! A process as `--json` gives it: the names and values of MCP's structuredContent (lower-case
//! states and kinds, `SIGTERM`-style signals, times in `_ms`), then the rest of the record. One
//! shape for every command that prints a process; docs/json.md is its reference.

use cuba_protocol::{ClientKind, ProcessInfo};
use serde::Serialize;

use crate::usage::Usage;

#[derive(Serialize)]
pub struct ProcessJson<'a> {
    /// The host it runs on, when not this machine (and in a listing of every host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<&'a str>,
    pub id: u64,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    /// `command`, `session` (a session's shell) or `in_session` (a command in one).
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tty: Option<Tty>,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
    /// Who started it: the MCP client's name, or `cubactl`.
    pub owner: &'a str,
    /// `mcp`, `cli` or `other`.
    pub owner_kind: &'static str,
    pub owner_pid: u32,
    pub command: &'a str,
    pub cwd: &'a str,
    pub started_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// How long it ran (so far).
    pub time_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Output bytes in all; `next` for a read from the start.
    pub bytes: u64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// Memory of its tree (cgroup): now while it runs, the peak once it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_bytes: Option<u64>,
    /// Its cgroup's pids cap, and the forks the kernel refused at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forks_refused: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spool: Option<&'a str>,
    /// The TCP port leased to it (`start --port`), its `PORT`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The agent whose budget holds its tree, and the last time that budget was reached while
    /// it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_hit: Option<&'a str>,
    /// Execs the daemon refused in its tree (exec checks), the first few.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedJson<'a>>,
    /// The first and last error lines found in its output, and how many.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<&'a cuba_protocol::ErrorMarks>,
    /// Questions put to a person about it, unanswered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<AskJson<'a>>,
    /// What cubactl measured on this machine (`ps`, `info`): running processes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<&'a Usage>,
}

/// An exec refused in a process's tree.
#[derive(Serialize)]
pub struct BlockedJson<'a> {
    pub program: &'a str,
    pub argv: &'a [String],
    pub rule: &'a str,
    pub message: &'a str,
    pub pid: u32,
    /// Killed after its exec rather than refused at it.
    pub killed: bool,
}

/// A question put to a person: `kind` `command` (held before it started), `exec` (held at an
/// exec) or `password` (asked by a program through the askpass helper).
#[derive(Serialize)]
pub struct AskJson<'a> {
    pub id: u64,
    pub kind: &'static str,
    pub what: &'a str,
    pub rule: &'a str,
    pub pid: u32,
    pub cwd: &'a str,
    pub asked_at_ms: u64,
    pub deadline_ms: u64,
}

impl<'a> AskJson<'a> {
    pub fn of(a: &'a cuba_protocol::Ask) -> AskJson<'a> {
        AskJson {
            id: a.id,
            kind: a.kind.as_str(),
            what: &a.what,
            rule: &a.rule,
            pid: a.pid,
            cwd: &a.cwd,
            asked_at_ms: a.asked_at_ms,
            deadline_ms: a.deadline_ms,
        }
    }
}

#[derive(Serialize)]
pub struct Tty {
    pub cols: u16,
    pub rows: u16,
}

/// The daemon's memory figure of a process (its cgroup's): now while it runs, its peak once
/// it ended.
pub fn memory(p: &ProcessInfo) -> Option<u64> {
    match p.state.is_finished() {
        true => p.memory_peak_bytes.or(p.memory_bytes),
        false => p.memory_bytes,
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub fn owner_kind(kind: ClientKind) -> &'static str {
    match kind {
        ClientKind::Mcp => "mcp",
        ClientKind::Cli => "cli",
        ClientKind::Other => "other",
    }
}

impl<'a> ProcessJson<'a> {
    pub fn of(p: &'a ProcessInfo) -> ProcessJson<'a> {
        let now = cuba_protocol::now_ms();
        ProcessJson {
            host: None,
            id: p.id,
            pid: p.pid,
            name: p.name.as_deref(),
            kind: p.kind.as_str(),
            session: p.session.as_deref(),
            tty: p.tty.map(|t| Tty {
                cols: t.cols,
                rows: t.rows,
            }),
            state: p.state.as_str(),
            exit_code: p.exit_code,
            signal: p.signal.map(|s| s.to_string()),
            error: p.error.as_deref(),
            owner: &p.owner.name,
            owner_kind: owner_kind(p.owner.kind),
            owner_pid: p.owner.pid,
            command: &p.command,
            cwd: &p.cwd,
            started_at_ms: p.started_at_ms,
            ended_at_ms: p.ended_at_ms,
            time_ms: p.elapsed_ms(now),
            timeout_ms: p.timeout_ms,
            bytes: p.total_bytes(),
            stdout_bytes: p.stdout_bytes,
            stderr_bytes: p.stderr_bytes,
            dropped_bytes: p.dropped_bytes,
            cpu_ms: p.cpu_ms,
            mem_bytes: memory(p),
            pids_max: p.pids_max,
            forks_refused: p.forks_refused,
            notice: p.notice.as_deref(),
            spool: p.spool.as_deref(),
            port: p.port,
            budget: p.budget.as_deref(),
            budget_hit: p.budget_hit.as_deref(),
            blocked: p
                .blocked
                .iter()
                .map(|b| BlockedJson {
                    program: &b.program,
                    argv: &b.argv,
                    rule: &b.rule,
                    message: &b.message,
                    pid: b.pid,
                    killed: b.killed,
                })
                .collect(),
            asks: p.asks.iter().map(AskJson::of).collect(),
            errors: p.errors.as_ref(),
            usage: None,
        }
    }

    pub fn on(mut self, host: Option<&'a str>) -> ProcessJson<'a> {
        self.host = host;
        self
    }

    pub fn with(mut self, usage: Option<&'a Usage>) -> ProcessJson<'a> {
        self.usage = usage;
        self
    }
}

/// `processes` as JSON rows.
pub fn all(processes: &[ProcessInfo]) -> Vec<ProcessJson<'_>> {
    processes.iter().map(ProcessJson::of).collect()
}

/// `cubactl approvals --json`: the questions waiting for an answer and the remembered approvals.
#[derive(Serialize)]
pub struct ApprovalsJson<'a> {
    pub pending: Vec<PendingJson<'a>>,
    pub remembered: &'a [cuba_protocol::Remembered],
    pub file: &'a str,
    /// How the file differs from what is in effect (edited by hand, not yet reloaded).
    pub unconfirmed: &'a [String],
}

/// A process's question, with the process's id, owner and command.
#[derive(Serialize)]
pub struct PendingJson<'a> {
    pub id: u64,
    pub owner: &'a str,
    pub command: &'a str,
    pub ask: AskJson<'a>,
}

impl<'a> ApprovalsJson<'a> {
    pub fn of(a: &'a cuba_protocol::Approvals) -> ApprovalsJson<'a> {
        ApprovalsJson {
            pending: a
                .pending
                .iter()
                .map(|p| PendingJson {
                    id: p.id,
                    owner: &p.owner,
                    command: &p.command,
                    ask: AskJson::of(&p.ask),
                })
                .collect(),
            remembered: &a.remembered,
            file: &a.file,
            unconfirmed: &a.unconfirmed,
        }
    }
}
