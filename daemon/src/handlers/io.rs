//! `Read` (output since a cursor, or the tail) and `Stdin` (write, close).

use cuba_protocol::{ErrorKind, ProtocolError, ReadRequest, ResizeRequest, Response, StdinRequest};
use tokio::sync::mpsc::error::TrySendError;

use crate::daemon::Daemon;
use cuba_protocol::{ProcKind, ProcState};

use crate::proc::{Control, StdinMsg};

pub fn read(d: &Daemon, r: ReadRequest) -> Result<Response, ProtocolError> {
    let p = d.get(r.id)?;
    let max = r.max_bytes.min(cuba_protocol::wire::MAX_OUTPUT_PER_FRAME);
    let out = p.lock().output.read(r.since, u64::from(max), r.stream);
    Ok(Response::Output(out))
}

pub fn stdin(d: &Daemon, r: StdinRequest) -> Result<Response, ProtocolError> {
    let p = d.get(r.id)?;
    let (tx, finished) = {
        let data = p.lock();
        (data.stdin.clone(), data.finished())
    };
    let closed = || {
        let why = if finished {
            "the process has ended"
        } else {
            "its stdin is closed (EOF was sent, or the process closed it)"
        };
        ProtocolError::new(
            ErrorKind::InvalidState,
            format!("cannot write to process {}: {why}", r.id),
        )
    };
    let tx = tx.ok_or_else(closed)?;
    let full = |_| {
        ProtocolError::new(
            ErrorKind::Limit,
            format!(
                "process {} is not reading its stdin and the queue is full; wait for it to \
                 read, or close stdin",
                r.id
            ),
        )
    };
    let send = |msg: StdinMsg| match tx.try_send(msg) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => Err(full(())),
        Err(TrySendError::Closed(_)) => Err(closed()),
    };
    let (tty, kind) = {
        let data = p.lock();
        (data.tty.is_some(), data.info.kind)
    };
    if r.eof && kind == ProcKind::InSession {
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!(
                "cannot close the stdin of process {}: it runs in a session, whose later \
                 commands read that stdin too; interrupt it (SIGINT) instead",
                r.id
            ),
        ));
    }
    if kind == ProcKind::Session && !d.sessions.busy(p.id) {
        // Nothing would read it now, and the next command would get it as its input.
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!(
                "session process {} runs no command now, so nothing reads its input; run a \
                 command in the session (run with session)",
                r.id
            ),
        ));
    }
    if !r.data.is_empty() {
        send(StdinMsg::Data(r.data))?;
    }
    if r.eof && tty {
        // A terminal is not closed: end-of-file is C-d, through the line discipline, as when
        // a person types it.
        send(StdinMsg::Data(vec![0x04]))?;
    } else if r.eof {
        send(StdinMsg::Eof)?;
        p.lock().stdin = None;
    }
    // Answered (or closed): no longer waiting for input, from this reply on.
    moved_on(d, &p);
    Ok(Response::Ok)
}

/// The process got something to react to (input, a new terminal size): it is no longer
/// `WaitingInput` from this reply on (so a `Wait` right after does not return a stale state),
/// and its supervisor starts the quiet period again.
fn moved_on(d: &Daemon, p: &crate::proc::Proc) {
    let (was_waiting, control) = {
        let mut data = p.lock();
        let waiting = data.info.state == ProcState::WaitingInput;
        if waiting {
            data.info.state = ProcState::Running;
        }
        (waiting, data.control.clone())
    };
    if was_waiting {
        p.notify();
        d.table_changed();
    }
    if let Some(control) = control {
        let _ = control.try_send(Control::InputSent);
    }
}

fn not_a_tty(id: u64) -> ProtocolError {
    ProtocolError::new(
        ErrorKind::InvalidState,
        format!("process {id} has no terminal: start it with tty to get one"),
    )
}

pub fn resize(d: &Daemon, r: ResizeRequest) -> Result<Response, ProtocolError> {
    crate::pty::valid_size(r.size).map_err(|e| ProtocolError::new(ErrorKind::BadRequest, e))?;
    let p = d.get(r.id)?;
    let mut data = p.lock();
    if data.finished() {
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!("process {} has ended", r.id),
        ));
    }
    let tty = data.tty.as_mut().ok_or_else(|| not_a_tty(r.id))?;
    let master = tty.master.as_ref().ok_or_else(|| {
        ProtocolError::new(
            ErrorKind::InvalidState,
            format!("process {} has ended", r.id),
        )
    })?;
    master.resize(r.size).map_err(|e| {
        ProtocolError::new(
            ErrorKind::Internal,
            format!("cannot resize the terminal: {e}"),
        )
    })?;
    tty.screen.resize(r.size);
    data.info.tty = Some(r.size);
    drop(data);
    // A full-screen program redraws for its new size.
    moved_on(d, &p);
    Ok(Response::Ok)
}

pub fn screen(d: &Daemon, id: u64) -> Result<Response, ProtocolError> {
    let p = d.get(id)?;
    let data = p.lock();
    let tty = data.tty.as_ref().ok_or_else(|| not_a_tty(id))?;
    // Under the record's lock: the screen has seen exactly the output up to `total`.
    Ok(Response::Screen(tty.screen.view(data.output.total())))
}
