//! One entry of the process table: its row, its output, and the handles that steer it.
//!
//! Shared between the supervisor task that owns the child (`supervise.rs`) and the request
//! handlers that read it. Every change (output, state) bumps a `watch` channel, so waiters and
//! followers wake on events instead of polling.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use cuba_protocol::{ProcessInfo, Signal};
use tokio::sync::{mpsc, watch};

use crate::output::Output;
use crate::tree::TreeRoot;

/// Why a tree is being stopped: decides the final state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    Request,
    Timeout,
    Shutdown,
}

/// Messages to a process's supervisor.
#[derive(Debug)]
pub enum Control {
    /// Send `signal` to the whole tree of process `id`; escalate to SIGKILL after `grace` if
    /// given. A session's shell also gets these for the command running in it (the command's
    /// id): the command is interrupted, the session kept.
    Signal {
        id: u64,
        signal: Signal,
        grace: Option<std::time::Duration>,
    },
    /// The timeout of command `id` running in a session has passed.
    CommandTimeout(u64),
    /// Bytes were queued for its stdin: it is no longer waiting, and the quiet period restarts.
    InputSent,
}

/// Messages to a process's stdin writer.
#[derive(Debug)]
pub enum StdinMsg {
    Data(Vec<u8>),
    Eof,
}

pub struct ProcData {
    pub info: ProcessInfo,
    pub output: Output,
    /// All output is collected: the pipes closed (or were abandoned after the exit).
    pub drained: bool,
    pub last_output: Instant,
    pub stdin: Option<mpsc::Sender<StdinMsg>>,
    pub control: Option<mpsc::Sender<Control>>,
    pub root: Option<TreeRoot>,
    pub stop: Option<StopCause>,
    /// The terminal of a PTY process: its master end and the screen rendered from its output.
    pub tty: Option<TtyData>,
    /// The policy of the client that started it: a connection from inside its tree is held to
    /// it (`policy::ancestry`). `None` for records restored from the journal.
    pub policy: Option<std::sync::Arc<crate::policy::Effective>>,
}

pub struct TtyData {
    /// Dropped when the process is done, so an ended record holds no terminal.
    pub master: Option<std::sync::Arc<crate::pty::Master>>,
    pub screen: crate::pty::Screen,
}

pub struct Proc {
    pub id: u64,
    /// std Mutex: held for short, non-async sections only (an append, a bounded read).
    data: Mutex<ProcData>,
    changed: watch::Sender<()>,
}

impl Proc {
    pub fn new(data: ProcData) -> Proc {
        Proc {
            id: data.info.id,
            data: Mutex::new(data),
            changed: watch::Sender::new(()),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, ProcData> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A receiver that wakes on every later change.
    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    pub fn notify(&self) {
        self.changed.send_replace(());
    }

    /// The row as clients see it, with live byte counts.
    pub fn info(&self) -> ProcessInfo {
        self.lock().snapshot()
    }
}

impl ProcData {
    /// A record with no child attached (yet): `drained` for one restored from the journal.
    pub fn new(info: ProcessInfo, output: Output, drained: bool) -> ProcData {
        ProcData {
            info,
            output,
            drained,
            last_output: Instant::now(),
            stdin: None,
            control: None,
            root: None,
            stop: None,
            tty: None,
            policy: None,
        }
    }

    pub fn snapshot(&self) -> ProcessInfo {
        let mut info = self.info.clone();
        info.stdout_bytes = self.output.stdout_bytes;
        info.stderr_bytes = self.output.stderr_bytes;
        info.dropped_bytes = self.output.dropped();
        info
    }

    pub fn finished(&self) -> bool {
        self.info.state.is_finished()
    }
}
