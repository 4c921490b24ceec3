//! `Upgrade`: a person's verb. Judges the new binary before anything runs it (only the
//! installed program or a file only root may write: `new_program`), checks that it can
//! take the hand-over (and that nothing open cannot be handed over), answers with what the
//! new program will read differently, and asks the server loop to hand over. A refusal is an
//! error reply, and the daemon carries on.

#[cfg(unix)]
use std::path::PathBuf;

#[cfg(unix)]
use cuba_protocol::{Changes, ProtocolError};
use cuba_protocol::{Response, UpgradeRequest};

use super::Responder;
use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

pub async fn upgrade(d: &Daemon, caller: &Caller, r: UpgradeRequest, out: &Responder) {
    if let Err(e) = super::person(d, caller, "daemon upgrade", "upgrade or restart the daemon") {
        out.send(Response::Error(e)).await;
        return;
    }
    if let Err(e) = crate::platform::capability::UPGRADES.check() {
        out.send(Response::Error(e)).await;
        return;
    }
    #[cfg(unix)]
    hand_over(d, r, out).await;
    #[cfg(windows)]
    let _ = r;
}

/// Judges the binary, checks the hand-over and asks the server loop for it.
#[cfg(unix)]
async fn hand_over(d: &Daemon, r: UpgradeRequest, out: &Responder) {
    let binary = match r.binary {
        Some(b) if !b.is_empty() => PathBuf::from(b),
        _ => d.config().exe.clone(),
    };
    // A held exec was received by this program, and a held command lives only in it: answered
    // first, nothing is left waiting on a question the next program never asked.
    let pending = d.asks().pending();
    if !pending.is_empty() {
        let e = ProtocolError::invalid_state(format!(
            "cannot upgrade: {} question(s) wait for the user (`cubactl approvals`); answer or \
             deny them first",
            pending.len()
        ));
        out.send(Response::Error(e)).await;
        return;
    }
    let accepted = match crate::serving::new_program::accept(&binary, &d.config().exe) {
        Ok(a) => a,
        Err(why) => {
            let e = ProtocolError::invalid_state(format!("cannot upgrade: {why}"));
            out.send(Response::Error(e)).await;
            return;
        }
    };
    if let Err(why) = accepted.takes_handover(d.launcher().reaper()).await {
        out.send(Response::Error(ProtocolError::invalid_state(format!(
            "cannot upgrade: {why}"
        ))))
        .await;
        return;
    }
    let lines = super::person::changes(d);
    if !lines.is_empty() {
        tracing::info!(changes = ?lines, "the new program reads changed settings");
    }
    out.send(Response::Upgrading(Changes { lines })).await;
    d.ask_upgrade(accepted);
}
