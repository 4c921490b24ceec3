//! `Upgrade`: checks that the new binary can take the hand-over (and that nothing open cannot
//! be handed over), answers `Ok`, and asks the server loop to hand over. A refusal is an
//! error reply, and the daemon carries on.

use std::path::PathBuf;

use cuba_protocol::{ProtocolError, Response, UpgradeRequest};

use super::Responder;
use crate::daemon::Daemon;

pub async fn upgrade(d: &Daemon, r: UpgradeRequest, out: &Responder) {
    let binary = match r.binary {
        Some(b) if !b.is_empty() => PathBuf::from(b),
        _ => d.config().exe.clone(),
    };
    if !binary.is_absolute() {
        let e = ProtocolError::bad_request(format!(
            "binary {}: give an absolute path",
            binary.display()
        ));
        out.send(Response::Error(e)).await;
        return;
    }
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
    if let Err(why) = crate::handover::check_binary(d, &binary).await {
        out.send(Response::Error(ProtocolError::invalid_state(format!(
            "cannot upgrade: {why}"
        ))))
        .await;
        return;
    }
    out.send(Response::Ok).await;
    d.ask_upgrade(binary);
}
