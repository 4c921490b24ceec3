//! What can go wrong with a request, and what each failure says about whether the daemon saw it
//! (safe to send again) and whether connecting again may help.

use std::io;
use std::path::PathBuf;

use crate::handshake::HandshakeError;
use crate::message::{ErrorKind, ErrorReason, ProtocolError};
use crate::wire::WireError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach cubad at {path}: {source}")]
    Connect { path: PathBuf, source: io::Error },
    #[error("cannot start cubad ({exe}): {reason}")]
    Start { exe: PathBuf, reason: String },
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error(transparent)]
    Remote(#[from] ProtocolError),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("connection to cubad lost: {0}")]
    Io(#[from] io::Error),
    #[error("connection to cubad closed")]
    Closed,
    /// The daemon never saw the request: the connection was found closed before it was sent,
    /// or the daemon closed it (idle) saying it had read nothing it did not answer.
    #[error("connection to cubad closed (the request was not sent)")]
    Gone,
    /// The far end stopped speaking the protocol after the welcome (bytes that are not a reply,
    /// a reply begun and never finished). Not retried: the same link would do it again.
    #[error("{from} {why}; {}", match .sent {
        true => "the request may have reached it",
        false => "the request was not sent",
    })]
    Broken {
        /// `cubad`, or `the link to host NAME`.
        from: String,
        why: String,
        sent: bool,
    },
    #[error("cubad sent an unexpected reply: {0}")]
    Unexpected(String),
    /// A host could not be reached, or its daemon could not be spoken to.
    #[error("host {host}: {message}")]
    Bridge { host: String, message: String },
    /// A host that is unknown or not allowed.
    #[error("{0}")]
    Host(String),
}

impl ClientError {
    /// The daemon's error kind, when the daemon answered with an error.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ClientError::Remote(e) => Some(e.kind),
            _ => None,
        }
    }

    /// The reason a client may branch on, when the daemon answered with an error that has one.
    pub fn reason(&self) -> Option<&ErrorReason> {
        match self {
            ClientError::Remote(e) => e.reason.as_ref(),
            _ => None,
        }
    }

    /// The daemon cannot have acted on the request: it failed before anything was sent (no
    /// daemon, a failed start or handshake, a connection already closed). Only then is it safe
    /// to repeat a request that is not idempotent (a spawn, a stdin write).
    pub fn nothing_sent(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. }
                | ClientError::Start { .. }
                | ClientError::Handshake(_)
                | ClientError::Gone
                | ClientError::Bridge { .. }
                | ClientError::Host(_)
                | ClientError::Broken { sent: false, .. }
        )
    }

    /// The connection is gone (the daemon went away, or never answered): connecting again
    /// may help.
    pub fn connection_lost(&self) -> bool {
        matches!(
            self,
            ClientError::Closed
                | ClientError::Gone
                | ClientError::Io(_)
                | ClientError::Connect { .. }
        )
    }
}
