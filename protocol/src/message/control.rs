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

/// Signals: the ones a client may send, and the ones that only report how a process ended. A
/// real signal number exists only inside the daemon.
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
    /// A signal with no name here, by its number on the daemon's OS (a real-time signal).
    Other(i32),
    // Signals that end a process but cannot be requested: reported by name, so a client on
    // another OS reads the same signal.
    Ill,
    Trap,
    Abrt,
    Bus,
    Fpe,
    Segv,
    Pipe,
    Alrm,
    Xcpu,
    Xfsz,
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
