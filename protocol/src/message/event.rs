//! The daemon's event log: what happened to processes (started, exited, waiting for input, an
//! output line a client's pattern matched, a port opened, a limit enforced, a question put to
//! the person and its answer), each with a sequence number that is its cursor. Read with
//! [`EventsRequest`] (once, or followed); a pattern to watch a process's output for is
//! registered with [`NotifyRequest`].

use serde::{Deserialize, Serialize};

use super::{AskKind, ProcState, Signal};

/// Most events one [`EventBatch`] carries; a request's `max` is capped to it (and 0 means it).
pub const MAX_EVENTS_PER_BATCH: u32 = 1000;

/// One thing that happened, with its place in the log.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its place in the log: strictly increasing, never reused (also across a restart or an
    /// in-place upgrade of the daemon).
    pub seq: u64,
    /// Unix time in milliseconds.
    pub at_ms: u64,
    /// The process it is about; `None` for one that never got a record (a spawn refused at
    /// `max_procs`).
    pub id: Option<u64>,
    pub kind: EventKind,
}

/// What happened.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A process started (or a command held for approval did once approved).
    Started {
        command: String,
        name: Option<String>,
    },
    /// A process ended, every way one ends (also `failed_to_start`, `denied`, `lost`).
    Exited {
        state: ProcState,
        exit_code: Option<i32>,
        signal: Option<Signal>,
    },
    /// The process is blocked reading its input; `prompt`: its last line of output (bounded).
    WaitingInput { prompt: String },
    /// A new output line matched a pattern a client registered ([`NotifyRequest`]).
    Matched { pattern: String, line: String },
    /// The process's tree listens on this TCP port (Linux only).
    PortOpened { port: u16 },
    /// The daemon enforced a limit: `timeout`, `orphan_timeout`, `memory`, `output`,
    /// `max_procs`, `pending_asks`; `detail` says what it did.
    LimitHit { limit: String, detail: String },
    /// A question was put to the person ([`super::Ask`]).
    AskRaised {
        ask: u64,
        kind: AskKind,
        what: String,
    },
    /// It was answered; `by`: who (a person's name, or `nobody` for the approval timeout).
    AskAnswered {
        ask: u64,
        approved: bool,
        by: String,
    },
}

impl EventKind {
    /// Its name as `cubactl events --json` writes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            EventKind::Started { .. } => "started",
            EventKind::Exited { .. } => "exited",
            EventKind::WaitingInput { .. } => "waiting_input",
            EventKind::Matched { .. } => "matched",
            EventKind::PortOpened { .. } => "port_opened",
            EventKind::LimitHit { .. } => "limit_hit",
            EventKind::AskRaised { .. } => "ask_raised",
            EventKind::AskAnswered { .. } => "ask_answered",
        }
    }
}

/// Read the event log. Answered by [`super::Response::Events`]: one batch, or with `follow`
/// a stream of them ending with [`super::Response::End`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct EventsRequest {
    /// The first sequence number wanted (a batch's `next`); `None`: every event kept.
    pub since: Option<u64>,
    /// Keep the request open: the backlog first, then each new batch as it happens.
    pub follow: bool,
    /// Only the events of this process.
    pub id: Option<u64>,
    /// Most events per batch; 0: [`MAX_EVENTS_PER_BATCH`], which also caps it.
    pub max: u32,
}

/// Events in sequence order, and where to go on from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct EventBatch {
    pub events: Vec<Event>,
    /// The `since` of the next request: past every event this batch considered (also those
    /// the caller may not see).
    pub next: u64,
    /// Events at or after the request's `since` that the log no longer holds (it keeps the
    /// last `events_keep`): a client that fell that far behind says so.
    pub lost: u64,
}

/// Watch a running process's output for `pattern` (a regex): each new line that matches is a
/// [`EventKind::Matched`] event. Answered by [`super::Response::Ok`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NotifyRequest {
    pub id: u64,
    pub pattern: String,
}
