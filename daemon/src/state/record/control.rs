//! What reaches a record's owners as messages: requests to its supervisor ([`Control`]) and
//! to its stdin writer ([`StdinMsg`]), and why its tree is being stopped ([`StopCause`]).

#[cfg(unix)]
use std::os::fd::RawFd;
use std::time::Duration;

use cuba_protocol::{Signal, TtySize};
use tokio::sync::oneshot;

/// Why a tree is being stopped: decides the final state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StopCause {
    Request,
    Timeout,
    Shutdown,
    /// It waited for input this long with the MCP client that started it gone and nobody
    /// following it (`orphan_timeout`).
    Orphaned {
        after_ms: u64,
    },
    /// The MCP client that started it had gone this long (`client_gone = "stop"`), or a
    /// person approved its stop (`"ask"`, `after_ms` 0).
    ClientGone {
        after_ms: u64,
    },
    /// Nobody read, waited on or followed it for this long (`unwatched_timeout`).
    Unwatched {
        after_ms: u64,
    },
}

impl StopCause {
    /// What the row's `error` says of the stop, when the state alone does not.
    pub(super) fn error(self) -> Option<String> {
        match self {
            StopCause::Orphaned { after_ms } => Some(format!(
                "stopped: it waited for input for {} after the MCP client that started it had \
                 gone, with nobody following it (orphan_timeout)",
                crate::base::config::shown_duration(std::time::Duration::from_millis(after_ms))
            )),
            StopCause::ClientGone { after_ms: 0 } => Some(
                "stopped: the MCP client that started it had gone, and a person approved the \
                 stop (client_gone = \"ask\")"
                    .into(),
            ),
            StopCause::ClientGone { after_ms } => Some(format!(
                "stopped: the MCP client that started it had gone {} before, with nobody \
                 following it (client_gone = \"stop\")",
                crate::base::config::shown_duration(std::time::Duration::from_millis(after_ms))
            )),
            StopCause::Unwatched { after_ms } => Some(format!(
                "stopped: nobody had read, waited on or followed it for {} (unwatched_timeout)",
                crate::base::config::shown_duration(std::time::Duration::from_millis(after_ms))
            )),
            _ => None,
        }
    }
}

/// Messages to a process's supervisor.
#[derive(Debug)]
pub enum Control {
    /// Send `signal` to the whole tree of process `id`; escalate to SIGKILL after `grace` if
    /// given; `stop` records why the process is being stopped (its final state). A session's
    /// shell also gets these for the command running in it (the command's id): the command is
    /// interrupted, the session kept.
    Signal {
        id: u64,
        signal: Signal,
        grace: Option<Duration>,
        stop: Option<StopCause>,
    },
    /// The timeout of command `id` running in a session has passed.
    #[cfg(unix)]
    CommandTimeout(u64),
    /// Bytes were queued for the stdin of process `id` (`eof`: and it was closed): it is no
    /// longer waiting for input, and the quiet period restarts. `done` answers once the record
    /// says so, so the request's reply (and any wait after it) never sees the stale state.
    Input {
        id: u64,
        eof: bool,
        done: oneshot::Sender<()>,
    },
    /// Resize the terminal (the program gets SIGWINCH) and its screen.
    Resize {
        size: TtySize,
        done: oneshot::Sender<std::io::Result<()>>,
    },
    /// Stop between two events and say what the process's ends and timers are, for an
    /// in-place upgrade; carry on when `resume` fires (or is dropped: the upgrade failed).
    /// `None` in reply: not now (it is ending, or is a session's shell running a command).
    #[cfg(unix)]
    Pause {
        reply: oneshot::Sender<Option<Paused>>,
        resume: oneshot::Receiver<()>,
    },
}

/// A paused supervisor's state: its output descriptors (still open, still its own) and
/// what is left of its timers.
#[cfg(unix)]
#[derive(Debug)]
pub struct Paused {
    pub stdout: Option<RawFd>,
    pub stderr: Option<RawFd>,
    pub timeout_left: Option<Duration>,
    pub kill_left: Option<Duration>,
}

/// A paused stdin writer's state: its descriptor (`None` on a terminal: the master is the
/// supervisor's), the bytes not yet written, and whether a close was asked for.
#[cfg(unix)]
#[derive(Debug)]
pub struct StdinPaused {
    pub fd: Option<RawFd>,
    pub pending: Vec<u8>,
    pub eof: bool,
}

/// Messages to a process's stdin writer.
#[derive(Debug)]
pub enum StdinMsg {
    Data(Vec<u8>),
    Eof,
    /// As [`Control::Pause`], for the writer.
    #[cfg(unix)]
    Pause {
        reply: oneshot::Sender<StdinPaused>,
        resume: oneshot::Receiver<()>,
    },
}
