//! The supervisor's deadlines share one timer. A `Sleep` made per deadline in every turn of
//! the loop registers with the runtime's timer on each turn and leaves it when another event
//! wins, and a registration earlier than the timer's next wake-up writes the runtime's wake-up
//! descriptor: four or five writes and as many extra `epoll_wait` returns for a one-line
//! command. One timer, moved only when the earliest deadline comes sooner, costs one or two.

use std::pin::Pin;

use tokio::time::{sleep_until, Instant, Sleep};

use super::Supervisor;

/// One timer for the earliest of the supervisor's deadlines.
pub(super) struct Timer {
    sleep: Pin<Box<Sleep>>,
    /// When it is set to go off; `None` when it is not set (never, or it has gone off).
    armed: Option<Instant>,
}

impl Timer {
    pub(super) fn new() -> Timer {
        Timer {
            // Not registered until it is reset or polled.
            sleep: Box::pin(sleep_until(Instant::now())),
            armed: None,
        }
    }

    /// Sets the timer for `next`, unless it already goes off sooner: a deadline that moved
    /// later (the input check, pushed back by each output) costs one early wake-up instead
    /// of a registration per output. Returns whether it is to be waited on.
    pub(super) fn aim(&mut self, next: Option<Instant>) -> bool {
        let Some(next) = next else { return false };
        if self.armed.is_none_or(|a| next < a) {
            self.sleep.as_mut().reset(next);
            self.armed = Some(next);
        }
        true
    }

    /// Resolves when the timer goes off; it is unset from then on.
    pub(super) async fn fired(&mut self) {
        self.sleep.as_mut().await;
        self.armed = None;
    }
}

impl Supervisor<'_> {
    /// The earliest deadline that is in force.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let live = !self.exited;
        [
            self.timeout_at.filter(|_| live),
            self.kill_at,
            self.abandon_at,
            self.input_check_at.filter(|_| live),
            self.orphan.as_ref().and_then(|o| o.at).filter(|_| live),
            self.leftover
                .as_ref()
                .and_then(|l| l.gone_at)
                .filter(|_| live),
            self.leftover
                .as_ref()
                .and_then(|l| l.unwatched_at)
                .filter(|_| live),
            self.spill_at,
            self.cmd_kill_at,
            self.cmd_abandon_at,
            self.cmd_reinterrupt.map(|(at, _)| at),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Handles every deadline that has passed, in a fixed order: a time limit before the KILL
    /// it may bring forward, the KILL before giving up on the pipes.
    pub(super) async fn due(&mut self) {
        let now = Instant::now();
        let past = |at: Option<Instant>| at.is_some_and(|at| at <= now);
        if !self.exited && past(self.timeout_at) {
            self.timeout_at = None;
            self.timed_out();
        }
        if past(self.kill_at) {
            self.kill_at = None;
            self.kill_now();
        }
        if past(self.abandon_at) {
            self.abandon_at = None;
            // The KILL still comes before the loop (and its timers) ends.
            if self.kill_at.take().is_some() {
                self.kill_now();
            }
            self.stdout = None;
            self.stderr = None;
        }
        if !self.exited && past(self.input_check_at) {
            self.input_check_at = None;
            self.check_input();
        }
        if !self.exited && past(self.orphan.as_ref().and_then(|o| o.at)) {
            self.orphan_due();
        }
        if !self.exited && past(self.leftover.as_ref().and_then(|l| l.gone_at)) {
            self.leftover_gone_due();
        }
        if !self.exited && past(self.leftover.as_ref().and_then(|l| l.unwatched_at)) {
            self.leftover_unwatched_due();
        }
        if past(self.spill_at) {
            self.spill_at = None;
            let dropped = self.p.lock().output.dropped();
            self.p.spill().await;
            self.report_output_cap(dropped);
            if let Some(cmd) = self.write_target(None, |cmd| cmd.spill()) {
                cmd.await;
            }
        }
        if let Some((at, times)) = self.cmd_reinterrupt {
            if at <= now {
                self.cmd_reinterrupt = None;
                self.interrupt_again(times);
            }
        }
        if past(self.cmd_kill_at) {
            self.cmd_kill_at = None;
            self.kill_command();
        }
        if past(self.cmd_abandon_at) {
            self.cmd_abandon_at = None;
            self.abandon_command();
        }
    }
}
