//! A command running in a session's shell, steered through the shell's supervisor: signals and
//! timeouts interrupt the command as Ctrl-C would and keep the session; a command that ignores
//! that is killed below the shell, and a shell stuck in it is stopped.

use std::time::Duration;

use cuba_protocol::Signal;
use tokio::time::Instant;

use super::{Supervisor, ABANDON_AFTER};

/// The first repeat of a session command's interrupt, and how many there are (doubling
/// pauses: 0.1, 0.2, 0.4 … 3.2 s, 6.3 s in all). On a loaded machine the process the shell was
/// starting can take more than a second to reach its exec, and each repeat before that is lost.
const REINTERRUPT: Duration = Duration::from_millis(100);
const REINTERRUPTS: u32 = 6;
use crate::parts::tree;
use crate::state::record::StopCause;

impl Supervisor<'_> {
    /// A signal for the command `id` running in this session's shell. Ending signals interrupt
    /// it as Ctrl-C would (SIGINT to the shell's group: the shell's trap ends the command, the
    /// session stays); others go to the processes below the shell.
    pub(super) fn signal_command(
        &mut self,
        id: u64,
        signal: Signal,
        grace: Option<Duration>,
        stop: Option<StopCause>,
    ) {
        let running = self.write_target(Some(id), |cmd| {
            if let Some(cause) = stop {
                let mut c = cmd.lock();
                if c.stop.is_none() && !c.finished() {
                    c.stop = Some(cause);
                }
            }
        });
        if running.is_none() {
            return;
        }
        match signal {
            Signal::Kill => {
                self.signal_below_shell(cuba_protocol::Signal::Kill.number());
                self.cmd_abandon_at = Some(Instant::now() + ABANDON_AFTER);
            }
            Signal::Term | Signal::Int | Signal::Hup | Signal::Quit => {
                self.signal_tree(cuba_protocol::Signal::Int.number());
                self.cmd_reinterrupt = Some((Instant::now() + REINTERRUPT, 0));
                if let Some(grace) = grace {
                    self.cmd_kill_at = Some(Instant::now() + grace);
                }
            }
            other => {
                self.signal_below_shell(other.number());
            }
        }
    }

    /// The timeout of command `id` has passed: it is interrupted and ends `timed_out`.
    #[cfg(unix)]
    pub(super) fn command_timeout(&mut self, id: u64) {
        let grace = Some(self.grace);
        if let Ok(cmd) = self.table.get(id) {
            let limit = cmd.lock().info().timeout_ms.unwrap_or(0);
            let detail = format!("ran past its timeout of {limit} ms: interrupted");
            self.report_limit(&cmd, "timeout", detail);
        }
        self.signal_command(id, Signal::Int, grace, Some(StopCause::Timeout));
    }

    /// An interrupted command still runs: SIGINT again below the shell, a few times. A process
    /// the shell was starting as the first one came (forked, not yet exec'd: still running the
    /// shell's handler) lost it, and the shell's trap waits for that process to end.
    pub(super) fn interrupt_again(&mut self, times: u32) {
        if self.route.as_ref().and_then(|r| r.current()).is_none() {
            return;
        }
        self.signal_below_shell(cuba_protocol::Signal::Int.number());
        if times + 1 < REINTERRUPTS {
            self.cmd_reinterrupt = Some((
                Instant::now() + REINTERRUPT * 2u32.pow(times + 1),
                times + 1,
            ));
        }
    }

    /// The grace period of an interrupted command is over: SIGKILL what runs below the shell.
    pub(super) fn kill_command(&mut self) {
        if self.route.as_ref().and_then(|r| r.current()).is_some() {
            self.signal_below_shell(cuba_protocol::Signal::Kill.number());
            self.cmd_abandon_at = Some(Instant::now() + ABANDON_AFTER);
        }
    }

    /// Even SIGKILL below the shell did not end the command: the shell itself is stuck in it.
    /// The session is stopped; the next command starts a new one.
    pub(super) fn abandon_command(&mut self) {
        if self.route.as_ref().and_then(|r| r.current()).is_some() {
            tracing::debug!(
                id = self.p.id,
                "session shell stuck in a command: stopping it"
            );
            self.mark_stopped(StopCause::Request);
            self.signal(Signal::Kill, None);
        }
    }

    fn signal_below_shell(&self, signal: i32) -> usize {
        match self.tree() {
            Some((root, cgroup)) => {
                tree::signal_descendants(&root, signal, &self.find(cgroup.as_deref()))
            }
            None => 0,
        }
    }
}
