//! `Stdin`: bytes for a process's stdin (queued for its stdin writer), or closing it. The
//! supervisor is told, and has cleared `waiting_input`, before the reply. A write with a token
//! is queued once: a retry is answered `Ok` without writing.

use cuba_protocol::{ErrorKind, ProcKind, ProtocolError, Response, StdinRequest};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::oneshot;

use crate::serving::daemon::Daemon;
use crate::state::record::{Control, StdinMsg};
use crate::state::tokens::{Claim, Done, Stamp};

pub async fn stdin(d: &Daemon, r: StdinRequest) -> Result<Response, ProtocolError> {
    let id = r.id;
    let queued = match Stamp::of_stdin(&r) {
        None => queue(d, r)?,
        Some(stamp) => match d.tokens().claim(stamp).await? {
            Claim::Again(_) => return Ok(Response::Ok),
            Claim::First(pending) => {
                // Remembered as soon as it is queued: the reply's await below may be dropped
                // with the connection, and the bytes are on their way by then.
                let queued = queue(d, r)?;
                pending.finish(Done::Written { id });
                queued
            }
        },
    };
    let (control, close) = queued;
    answered(control, id, close).await;
    Ok(Response::Ok)
}

/// Queues `r` for the stdin writer (no await): the supervisor's control handle, and whether
/// stdin is being closed.
fn queue(
    d: &Daemon,
    r: StdinRequest,
) -> Result<(Option<mpsc::Sender<Control>>, bool), ProtocolError> {
    let p = d.table().get(r.id)?;
    let (tx, control, finished, tty, kind) = {
        let data = p.lock();
        let handles = (data.stdin.clone(), data.control.clone());
        let facts = (data.finished(), data.tty.is_some(), data.info().kind);
        (handles.0, handles.1, facts.0, facts.1, facts.2)
    };
    let closed = || {
        let why = if finished {
            "the process has ended"
        } else {
            "its stdin is closed (EOF was sent, or the process closed it)"
        };
        ProtocolError::invalid_state(format!("cannot write to process {}: {why}", r.id))
    };
    let tx = tx.ok_or_else(closed)?;
    in_session_rules(d, &r, kind)?;
    let send = |msg: StdinMsg| match tx.try_send(msg) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => Err(ProtocolError::new(
            ErrorKind::Limit,
            format!(
                "process {} is not reading its stdin and the queue is full; wait for it to \
                 read, or close stdin",
                r.id
            ),
        )),
        Err(TrySendError::Closed(_)) => Err(closed()),
    };
    if !r.data.is_empty() {
        send(StdinMsg::Data(r.data))?;
    }
    // A terminal is not closed: end-of-file is C-d, through the line discipline, as when a
    // person types it.
    let close = r.eof && !tty;
    if r.eof && tty {
        send(StdinMsg::Data(vec![0x04]))?;
    } else if close {
        send(StdinMsg::Eof)?;
    }
    Ok((control, close))
}

/// A session's stdin is shared by its commands: it is never closed, and written only while a
/// command runs.
fn in_session_rules(d: &Daemon, r: &StdinRequest, kind: ProcKind) -> Result<(), ProtocolError> {
    if r.eof && kind == ProcKind::InSession {
        return Err(ProtocolError::invalid_state(format!(
            "cannot close the stdin of process {}: it runs in a session, whose later commands \
             read that stdin too; interrupt it (SIGINT) instead",
            r.id
        )));
    }
    if kind == ProcKind::Session && !d.sessions().busy(r.id) {
        // Nothing would read it now, and the next command would get it as its input.
        return Err(ProtocolError::invalid_state(format!(
            "session process {} runs no command now, so nothing reads its input; run a command \
             in the session (run with session)",
            r.id
        )));
    }
    Ok(())
}

/// Answered (or closed): the supervisor marks it no longer waiting for input, and the reply
/// waits for that.
async fn answered(control: Option<mpsc::Sender<Control>>, id: u64, eof: bool) {
    if let Some(control) = control {
        let (done, applied) = oneshot::channel();
        if control.send(Control::Input { id, eof, done }).await.is_ok() {
            // A supervisor that ends meanwhile drops `done`: nothing is waiting then.
            let _ = applied.await;
        }
    }
}
