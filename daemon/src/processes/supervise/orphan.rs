//! Orphaned commands: one an MCP client started that waits for input after that client has
//! gone (its editor closed), with nobody following it, can never be answered; it would keep
//! its place under `max_procs` for good. It is stopped once it has been so for
//! `orphan_timeout`. The client's exit is an event (a pidfd on Linux); the wait for input is
//! the supervisor's own state; followers (`tail -f`, `attach`, a `wait`) are the record's
//! subscribers, counted when the time is up.

use std::time::Duration;

use cuba_protocol::{ClientInfo, ClientKind, ProcState, Signal};
use tokio::time::Instant;

use super::Supervisor;
use crate::platform::signal::ExitWatch;
use crate::state::record::StopCause;

pub struct Orphan {
    /// `None`: watched for `client_gone` only; a command waiting for input is kept.
    after: Option<Duration>,
    /// The client's exit; `None` once it has exited.
    owner: Option<ExitWatch>,
    /// When the stop is due: set while the command waits for input with its client gone.
    pub(super) at: Option<Instant>,
}

impl Orphan {
    /// The watch for what `client` starts, whose connection's peer is `peer_pid`: an MCP
    /// client on this machine, talking for itself (a bridged client's pid is another
    /// machine's). `None` for any other client, or where its exit cannot be watched, or when
    /// neither `after` nor `client_gone` (`also`) needs it.
    pub fn of(
        client: &ClientInfo,
        peer_pid: Option<i32>,
        after: Option<Duration>,
        also: bool,
    ) -> Option<Orphan> {
        if after.is_none() && !also {
            return None;
        }
        let pid = i32::try_from(client.pid).ok()?;
        if client.kind != ClientKind::Mcp || peer_pid != Some(pid) {
            return None;
        }
        match ExitWatch::of(pid) {
            Ok(owner) => Some(Orphan {
                after,
                owner: Some(owner),
                at: None,
            }),
            Err(e) => {
                tracing::warn!(pid, "cannot watch the MCP client's exit: {e}");
                None
            }
        }
    }

    /// Whether the client is still watched (its exit is still to come).
    pub(super) fn watching(this: &Option<Orphan>) -> bool {
        this.as_ref().is_some_and(|o| o.owner.is_some())
    }

    /// Resolves when the client exits (never if it is not watched).
    pub(super) async fn exited(this: &Option<Orphan>) {
        match this.as_ref().and_then(|o| o.owner.as_ref()) {
            Some(owner) => owner.exited().await,
            None => std::future::pending().await,
        }
    }
}

impl Supervisor<'_> {
    /// The client that started it has exited.
    pub(super) fn owner_gone(&mut self) {
        if let Some(o) = self.orphan.as_mut() {
            o.owner = None;
            tracing::debug!(id = self.p.id, "its MCP client has gone");
        }
        if self.waiting_target().is_some() {
            self.arm_orphan();
        }
        self.leftover_client_gone();
    }

    /// It waits for input now: with its client gone, the clock starts.
    pub(super) fn arm_orphan(&mut self) {
        if let Some(o) = self.orphan.as_mut().filter(|o| o.owner.is_none()) {
            o.at = o.after.map(|after| Instant::now() + after);
        }
    }

    /// It got input or wrote output: not waiting any more.
    pub(super) fn disarm_orphan(&mut self) {
        if let Some(o) = self.orphan.as_mut() {
            o.at = None;
        }
    }

    /// The time is up: stopped if it still waits and nobody follows it; checked again after
    /// as long if someone does.
    pub(super) fn orphan_due(&mut self) {
        let Some(after) = self.orphan.as_mut().and_then(|o| {
            o.at = None;
            o.after
        }) else {
            return;
        };
        let Some(target) = self.waiting_target() else {
            return;
        };
        if target.followers() > 0 {
            self.arm_orphan();
            return;
        }
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        let cause = StopCause::Orphaned { after_ms };
        tracing::info!(
            id = target.id,
            "stopping a command waiting for input whose MCP client has gone"
        );
        let grace = Some(self.grace);
        let detail = format!(
            "waited for input {} ms after its MCP client had gone, with nobody following it: \
             stopped",
            after_ms
        );
        self.report_limit(&target, "orphan_timeout", detail);
        if target.id == self.p.id {
            self.mark_stopped(cause);
            self.signal(Signal::Term, grace);
        } else {
            self.signal_command(target.id, Signal::Int, grace, Some(cause));
        }
    }

    /// The record waiting for input: this one, or in a session the command running now.
    fn waiting_target(&self) -> Option<std::sync::Arc<crate::state::record::Proc>> {
        let target = match &self.route {
            Some(route) => route.current()?,
            None => self.p.proc().clone(),
        };
        let waiting = target.lock().info().state == ProcState::WaitingInput;
        waiting.then_some(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_exit_of_a_watched_process_is_an_event() {
        #[allow(clippy::unwrap_used)]
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let watch = ExitWatch::of(pid).expect("watchable");
        let early = tokio::time::timeout(Duration::from_millis(50), watch.exited()).await;
        assert!(early.is_err(), "a live process has not exited");
        let _ = child.kill();
        let _ = child.wait();
        let exited = tokio::time::timeout(Duration::from_secs(10), watch.exited()).await;
        assert!(exited.is_ok(), "the exit was not seen");
        // One long gone has exited at once.
        let gone = ExitWatch::of(pid).expect("a gone pid is no error");
        assert!(tokio::time::timeout(Duration::from_secs(1), gone.exited())
            .await
            .is_ok());
    }
}
