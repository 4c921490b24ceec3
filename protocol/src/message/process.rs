//! The process table: one row per process, its states and kinds, and the requests that name
//! or filter rows.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ClientKind, Signal, TtySize};

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRequest {
    pub id: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRequest {
    pub state: Option<ProcState>,
    /// Owner name (exact match).
    pub owner: Option<String>,
    /// Process name (exact match).
    pub name: Option<String>,
    /// Most finished records in the reply, the newest first; the rest are only counted
    /// ([`Listing::hidden`]). `None`: all of them.
    pub finished: Option<u32>,
    /// Most running (and waiting) records in the reply, the newest first; the rest are only
    /// counted ([`Listing::hidden_running`]). `None`: all of them. Only the rows returned have
    /// their figures read, so a bounded listing costs the same however many run.
    pub running: Option<u32>,
}

/// The rows a [`ListRequest`] asked for, by id, and how many finished and running rows matched
/// but were left out by its `finished` and `running` limits.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub processes: Vec<ProcessInfo>,
    pub hidden: u64,
    pub hidden_running: u64,
    /// The budgets of the agents this caller may see, with their use now.
    pub budgets: Vec<super::BudgetUse>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcState {
    Running,
    WaitingInput,
    Exited,
    Signaled,
    TimedOut,
    Killed,
    FailedToStart,
    Lost,
    /// Held until a person answers: a command the policy says to ask about (not started), or a
    /// running command with an exec held (see [`ProcessInfo::asks`]).
    AwaitingApproval,
    /// A person (or the `approval_timeout`) said no: the command never started.
    Denied,
}

impl ProcState {
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            ProcState::Running | ProcState::WaitingInput | ProcState::AwaitingApproval
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProcState::Running => "running",
            ProcState::WaitingInput => "waiting_input",
            ProcState::Exited => "exited",
            ProcState::Signaled => "signaled",
            ProcState::TimedOut => "timed_out",
            ProcState::Killed => "killed",
            ProcState::FailedToStart => "failed_to_start",
            ProcState::Lost => "lost",
            ProcState::AwaitingApproval => "awaiting_approval",
            ProcState::Denied => "denied",
        }
    }
}

impl fmt::Display for ProcState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub kind: ClientKind,
    pub name: String,
    pub pid: u32,
}

/// One row of the process table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Small integer, unique across daemon restarts.
    pub id: u64,
    /// OS pid (0 when the process never started).
    pub pid: u32,
    pub owner: Owner,
    pub name: Option<String>,
    pub command: String,
    /// Working directory, for display.
    pub cwd: String,
    pub state: ProcState,
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<Signal>,
    /// Why it failed to start, or how it was lost.
    pub error: Option<String>,
    /// Unix time in milliseconds.
    pub started_at_ms: u64,
    pub ended_at_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    /// Bytes produced on stdout and stderr (the combined stream's length is their sum).
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Bytes no longer kept anywhere (the spool cap dropped them).
    pub dropped_bytes: u64,
    // `default`: journals written before these fields existed still load.
    #[serde(default)]
    pub kind: ProcKind,
    /// The terminal size of a PTY process; `None` when it runs on pipes.
    #[serde(default)]
    pub tty: Option<TtySize>,
    /// The session a [`ProcKind::Session`] shell is, or a [`ProcKind::InSession`] command ran in.
    #[serde(default)]
    pub session: Option<String>,
    /// Something the caller should know about how the request was carried out (e.g. a session
    /// was started again because its shell had ended).
    #[serde(default)]
    pub notice: Option<String>,
    /// The spool (the on-disk copy of the output) stopped, now or earlier: why, and how many
    /// bytes it does not have (`spool stopped: no space left on device; 1 234 bytes …`).
    #[serde(default)]
    pub spool: Option<String>,
    /// CPU time of the whole tree, milliseconds (from its cgroup; `None` where unknown). Kept
    /// when the process ends.
    #[serde(default)]
    pub cpu_ms: Option<u64>,
    /// Memory of the whole tree now (the last value once it ended), bytes.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// The most memory the tree used at once, bytes.
    #[serde(default)]
    pub memory_peak_bytes: Option<u64>,
    /// The cap on the tree's processes (`pids_max`), where its cgroup has one.
    #[serde(default)]
    pub pids_max: Option<u64>,
    /// Forks and clones the kernel refused at that cap (a build or server then fails with
    /// "Resource temporarily unavailable").
    #[serde(default)]
    pub forks_refused: Option<u64>,
    /// CPU use of the whole tree lately, in thousandths of a core (1000 = one core busy),
    /// while it runs: since the daemon's previous look at it (at least half a second before),
    /// or on its first look since the start. From its cgroup's CPU time; `None` where there is
    /// none.
    #[serde(default)]
    pub cpu_millicores: Option<u32>,
    /// Programs its tree tried to run that the daemon refused at their exec (the exec failed
    /// with EACCES, or the process was killed): the first few, oldest first.
    #[serde(default)]
    pub blocked: Vec<ExecBlocked>,
    /// Questions put to the person about it, unanswered: why it is `awaiting_approval`, or
    /// waiting for a password.
    #[serde(default)]
    pub asks: Vec<super::Ask>,
    /// Why it could not start, as a kind a client can act on without reading `error`'s words
    /// (which differ between systems).
    #[serde(default)]
    pub failure: Option<StartFailure>,
    /// The TCP port leased to it (`SpawnRequest::port`): its `PORT`, no other spawn's while it
    /// runs.
    #[serde(default)]
    pub port: Option<u16>,
    /// The first and last error lines of known toolchains found in its output, and how many
    /// (`None` when none were): where a long build's first error sits, however it is cut.
    #[serde(default)]
    pub errors: Option<ErrorMarks>,
    /// The agent whose budget holds its tree (`agent-1`), where one does.
    #[serde(default)]
    pub budget: Option<String>,
    /// The budget of its agent was reached while it ran: the last time, in a sentence
    /// (`cpu budget of agent-1 reached (0.5 cores): its processes were held back 2.1 s`).
    #[serde(default)]
    pub budget_hit: Option<String>,
}

/// Error lines found in a process's output (rustc, tsc, eslint, pytest, go, gcc/clang, make,
/// jest, npm).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ErrorMarks {
    pub first: ErrorMark,
    pub last: ErrorMark,
    /// Error lines found in all.
    pub count: u64,
}

/// One error line.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ErrorMark {
    /// Where the line starts in the combined output stream (the cursor `since` takes).
    pub cursor: u64,
    /// The line, escapes removed, cut to [`ErrorMark::MAX_LINE`] bytes.
    pub line: String,
    /// `src/main.rs:3:5`, when the line or the lines just after it name one.
    pub location: Option<String>,
}

impl ErrorMark {
    /// Most bytes of a line a mark keeps.
    pub const MAX_LINE: usize = 200;
}

/// What stopped a process from starting.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFailure {
    /// Its working directory, shell or program does not exist.
    NotFound,
    /// It exists and may not be used (or run).
    PermissionDenied,
    /// Anything else: `error` says what.
    Other,
}

impl StartFailure {
    /// The kind of an OS error.
    pub fn of(e: &std::io::Error) -> StartFailure {
        match e.kind() {
            std::io::ErrorKind::NotFound => StartFailure::NotFound,
            std::io::ErrorKind::PermissionDenied => StartFailure::PermissionDenied,
            _ => StartFailure::Other,
        }
    }
}

impl ExecBlocked {
    pub fn line(&self) -> String {
        // A connection the sandbox's proxy refused: the destination and how it was asked.
        if self.rule == "proxy" {
            return format!(
                "BLOCKED: a connection to {} ({}), rule proxy: {}",
                self.program,
                self.argv.join(" "),
                self.message
            );
        }
        let mut argv: String = self.argv.join(" ").chars().take(120).collect();
        if argv.chars().count() >= 120 {
            argv.push('…');
        }
        let how = match (self.killed, self.rule.as_str()) {
            (true, _) => "killed after its exec",
            // A refused `connect` or `bind` (the sandbox's Unix socket rule).
            (false, "unix_sockets") => "at a socket call",
            (false, _) => "at its exec",
        };
        format!(
            "BLOCKED: {} (`{argv}`, pid {}) {how}, rule {}: {}",
            self.program, self.pid, self.rule, self.message
        )
    }
}

/// An exec the daemon refused in a process's tree.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecBlocked {
    /// The program as resolved (after links and `#!`), e.g. `/usr/bin/rm`.
    pub program: String,
    /// Its arguments, shortened.
    pub argv: Vec<String>,
    /// The rule: `blocklist`, `allowlist`, `allowed_dirs`, `privileges`, `unreadable`; or
    /// `proxy` for a connection the sandbox's proxy refused (`program` is `HOST:PORT`, `argv`
    /// how it was asked); `unix_sockets` for a socket call the sandbox refused.
    pub rule: String,
    /// What was refused and why, one sentence.
    pub message: String,
    /// The process that tried.
    pub pid: u32,
    /// True when the program had already started and was killed (a caller that shares its
    /// memory with other threads can change the path after the check).
    pub killed: bool,
}

/// What a row of the table is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProcKind {
    /// A command run by the shell of its own.
    #[default]
    Command,
    /// The long-lived shell of a persistent session.
    Session,
    /// A command run in a session's shell: its own output, exit code and times; `pid` is the
    /// session shell's.
    InSession,
}

impl ProcKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcKind::Command => "command",
            ProcKind::Session => "session",
            ProcKind::InSession => "in_session",
        }
    }
}

impl ProcessInfo {
    /// "the kernel refused 37 forks at its pids cap (pids_max 64)", once it has refused any.
    pub fn refused_forks(&self) -> Option<String> {
        let n = self.forks_refused.filter(|n| *n > 0)?;
        let what = if n == 1 { "fork" } else { "forks" };
        Some(match self.pids_max {
            Some(max) => format!("the kernel refused {n} {what} at its pids cap (pids_max {max})"),
            None => format!("the kernel refused {n} {what} at its pids cap"),
        })
    }

    /// Each exec refused in its tree, one line: `BLOCKED: PROGRAM (`argv`, pid N) at its exec,
    /// rule RULE: why`.
    pub fn blocked_lines(&self) -> Vec<String> {
        self.blocked.iter().map(ExecBlocked::line).collect()
    }

    pub fn total_bytes(&self) -> u64 {
        self.stdout_bytes + self.stderr_bytes
    }

    /// Wall time so far (running) or in all (ended), given the current Unix time in ms.
    pub fn elapsed_ms(&self, now_ms: u64) -> u64 {
        self.ended_at_ms
            .unwrap_or(now_ms)
            .saturating_sub(self.started_at_ms)
    }
}
