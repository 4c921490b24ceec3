//! Errors that cross the wire.

use serde::{Deserialize, Serialize};

/// Error classes that cross the wire; clients map them to exit codes and MCP error texts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No process with that id (or it was pruned).
    NotFound,
    /// The request is malformed or its arguments are invalid.
    BadRequest,
    /// A limit was reached (`max_procs`, in-flight requests, queue sizes).
    Limit,
    /// The request was cancelled by the client.
    Cancelled,
    /// The daemon is shutting down.
    ShuttingDown,
    /// The operation is not possible in the process's current state (e.g. stdin closed).
    InvalidState,
    /// A peer of another uid, or a policy refusal.
    Denied,
    /// Something failed inside the daemon (I/O and the like).
    Internal,
    /// The command policy refused the command (blocklist, allowlist, unparsable text) or its
    /// working directory; the message names the rule and the sub-command.
    Blocked,
}

impl ErrorKind {
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::BadRequest => "BAD_REQUEST",
            ErrorKind::Limit => "LIMIT",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::ShuttingDown => "SHUTTING_DOWN",
            ErrorKind::InvalidState => "INVALID_STATE",
            ErrorKind::Denied => "DENIED",
            ErrorKind::Internal => "INTERNAL",
            ErrorKind::Blocked => "BLOCKED",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.code())]
pub struct ProtocolError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ProtocolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProtocolError {
            kind,
            message: message.into(),
        }
    }

    /// A malformed request or an invalid argument: the message says which and how to fix it.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ProtocolError::new(ErrorKind::BadRequest, message)
    }

    /// Not possible in the process's current state.
    pub fn invalid_state(message: impl Into<String>) -> Self {
        ProtocolError::new(ErrorKind::InvalidState, message)
    }
}
