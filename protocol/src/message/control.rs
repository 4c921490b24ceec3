//! Steering a running process: its stdin and signals.

use serde::{Deserialize, Serialize};

use super::RequestToken;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct StdinRequest {
    pub id: u64,
    pub data: Vec<u8>,
    /// Close stdin after writing `data`.
    pub eof: bool,
    /// As [`super::SpawnRequest::token`]: a retry with the same token is answered `Ok` without
    /// writing again.
    #[serde(default)]
    pub token: Option<RequestToken>,
}

/// Signals a client may send. A real signal number exists only inside the daemon.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    Term,
    Kill,
    Int,
    Hup,
    Quit,
    Usr1,
    Usr2,
    Stop,
    Cont,
    /// Any other signal, by number (reported when a process died of, say, SIGSEGV).
    Other(i32),
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalRequest {
    pub id: u64,
    pub signal: Signal,
    /// Follow with SIGKILL to the whole tree if it is still alive after the grace period.
    pub escalate: bool,
    /// Grace period; default: the daemon's (5 s unless configured).
    pub grace_ms: Option<u64>,
    /// Answer only once the process has ended (bounded by the grace period plus a margin).
    pub wait: bool,
}
