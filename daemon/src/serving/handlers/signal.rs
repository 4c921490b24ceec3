//! `Signal`: a signal to the process's whole tree, through its supervisor; graceful stops
//! escalate to SIGKILL after the grace period.

use std::time::Duration;

use cuba_protocol::{ProtocolError, Response, Signal, SignalRequest};
use tokio::time::{timeout_at, Instant};

use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;
use crate::state::record::{Control, Proc, StopCause};

/// Slack beyond the grace period for a `wait`ing signal request.
const WAIT_MARGIN: Duration = Duration::from_secs(3);

/// Signals after which an end counts as `killed` (stopped on request).
fn ends_process(signal: Signal) -> bool {
    matches!(
        signal,
        Signal::Term | Signal::Kill | Signal::Int | Signal::Hup | Signal::Quit
    )
}

pub async fn signal(
    d: &Daemon,
    caller: &Caller,
    r: SignalRequest,
) -> Result<Response, ProtocolError> {
    // A signal Windows has no meaning for is refused, naming what works there.
    #[cfg(windows)]
    crate::platform::win_signal::action(r.signal).map_err(ProtocolError::bad_request)?;
    let p = d.table().get(r.id)?;
    let grace = r.grace_ms.map_or(d.config().grace, Duration::from_millis);
    let control = {
        let data = p.lock();
        if data.finished() {
            return Err(ProtocolError::invalid_state(format!(
                "process {} has already ended ({})",
                r.id,
                data.info().state
            )));
        }
        data.control.clone()
    };
    let not_running = || ProtocolError::invalid_state(format!("process {} is not running", r.id));
    let Some(control) = control else {
        // A command held for a person's approval has no process yet: a stop withdraws its
        // question, and the wait for the answer ends it unstarted.
        let why = "stopped on request while it awaited approval".to_string();
        if ends_process(r.signal) && d.asks().withdraw(r.id, why, &caller.answerer()) {
            ended(&p, Instant::now() + WAIT_MARGIN).await;
            return Ok(Response::Process(p.info()));
        }
        return Err(not_running());
    };
    let msg = Control::Signal {
        id: r.id,
        signal: r.signal,
        grace: r.escalate.then_some(grace),
        stop: ends_process(r.signal).then_some(StopCause::Request),
    };
    if control.send(msg).await.is_err() {
        return Err(ProtocolError::invalid_state(format!(
            "process {} has already ended",
            r.id
        )));
    }
    if r.wait {
        ended(&p, Instant::now() + grace + WAIT_MARGIN).await;
    }
    Ok(Response::Process(p.info()))
}

/// Returns once `p` has ended, or at `deadline`.
async fn ended(p: &Proc, deadline: Instant) {
    let mut changes = p.subscribe();
    while !p.lock().finished() {
        match timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            _ => break,
        }
    }
}
