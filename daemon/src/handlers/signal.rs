//! `Signal`: a signal to the process's whole tree; graceful stops escalate to SIGKILL.

use std::time::Duration;

use cuba_protocol::{ErrorKind, ProtocolError, Response, Signal, SignalRequest};
use tokio::time::{timeout_at, Instant};

use crate::daemon::Daemon;
use crate::proc::{Control, StopCause};

/// Slack beyond the grace period for a `wait`ing signal request.
const WAIT_MARGIN: Duration = Duration::from_secs(3);

fn ends_process(signal: Signal) -> bool {
    matches!(
        signal,
        Signal::Term | Signal::Kill | Signal::Int | Signal::Hup | Signal::Quit
    )
}

pub async fn signal(d: &Daemon, r: SignalRequest) -> Result<Response, ProtocolError> {
    let p = d.get(r.id)?;
    let grace = r.grace_ms.map_or(d.config.grace, Duration::from_millis);
    let control = {
        let mut data = p.lock();
        if data.finished() {
            let info = data.snapshot();
            return Err(ProtocolError::new(
                ErrorKind::InvalidState,
                format!("process {} has already ended ({})", r.id, info.state),
            ));
        }
        if ends_process(r.signal) && data.stop.is_none() {
            data.stop = Some(StopCause::Request);
        }
        data.control.clone()
    };
    let Some(control) = control else {
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!("process {} is not running", r.id),
        ));
    };
    let msg = Control::Signal {
        id: r.id,
        signal: r.signal,
        grace: r.escalate.then_some(grace),
    };
    if control.send(msg).await.is_err() {
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!("process {} has already ended", r.id),
        ));
    }
    if r.wait {
        let mut changes = p.subscribe();
        let deadline = Instant::now() + grace + WAIT_MARGIN;
        while !p.lock().finished() {
            match timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => break,
            }
        }
    }
    Ok(Response::Process(p.info()))
}
