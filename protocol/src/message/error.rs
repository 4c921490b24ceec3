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
    /// This daemon's OS cannot do it ([`ErrorReason::Unsupported`] names the feature and the OS).
    Unsupported,
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
            ErrorKind::Unsupported => "UNSUPPORTED",
        }
    }
}

/// What a client branches on beside the kind, where it has words or an exit code of its own
/// for one refusal: the message is for people, this is for programs (no client decides
/// anything by matching the message's text).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum ErrorReason {
    /// The process has no terminal (a screen or resize of a process on pipes).
    NoTerminal,
    /// The command declares a side effect this daemon blocks.
    SideEffectBlocked,
    /// This daemon's OS cannot do it: the feature as the capability table names it, and the OS.
    Unsupported { feature: String, os: String },
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.code())]
pub struct ProtocolError {
    pub kind: ErrorKind,
    pub message: String,
    pub reason: Option<ErrorReason>,
}

impl ProtocolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProtocolError {
            kind,
            message: message.into(),
            reason: None,
        }
    }

    /// The same error, with the reason a client branches on.
    pub fn because(mut self, reason: ErrorReason) -> Self {
        self.reason = Some(reason);
        self
    }

    /// What this daemon's OS cannot do: `feature` as the capability table names it, and
    /// what to do instead (`os` in the reason is `std::env::consts::OS`).
    pub fn unsupported(feature: &str, instead: &str) -> Self {
        let os = std::env::consts::OS;
        let shown = match os {
            "windows" => "Windows",
            "macos" => "macOS",
            "linux" => "Linux",
            other => other,
        };
        ProtocolError::new(
            ErrorKind::Unsupported,
            format!("cubad on {shown} does not offer {feature}{instead}"),
        )
        .because(ErrorReason::Unsupported {
            feature: feature.to_string(),
            os: os.to_string(),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsupported_feature_names_itself_and_the_os() {
        let e = ProtocolError::unsupported("shell sessions", ": run each command on its own");
        assert_eq!(e.kind, ErrorKind::Unsupported);
        assert_eq!(
            e.reason,
            Some(ErrorReason::Unsupported {
                feature: "shell sessions".into(),
                os: std::env::consts::OS.into(),
            })
        );
        assert!(
            e.message
                .contains("does not offer shell sessions: run each"),
            "{e}"
        );
        assert!(e.to_string().starts_with("UNSUPPORTED: cubad on "), "{e}");
    }
}
