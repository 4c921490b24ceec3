//! How a process ended, as one value: written into the row by `Table::finish` and into
//! restored rows at start-up.

use cuba_protocol::{ProcState, ProcessInfo, Signal, StartFailure};

use super::StopCause;
use crate::platform::Exit;

/// How a process ended: its final state, exit code or signal, and the reason when it did not
/// simply exit. The one description of an end, written into the row by `Table::finish` and
/// into restored rows at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub state: ProcState,
    pub exit_code: Option<i32>,
    pub signal: Option<Signal>,
    pub error: Option<String>,
    pub failure: Option<StartFailure>,
}

impl Outcome {
    /// A process that exited with `exit`, having been stopped for `stop` (if it was). A stop
    /// on request is `killed` even if the process caught the signal and exited with a code.
    pub fn of_exit(stop: Option<StopCause>, exit: Exit) -> Outcome {
        let (exit_code, signal) = match exit {
            Exit::Code(code) => (Some(code), None),
            Exit::Signal(sig) => (None, Some(Signal::from_number(sig))),
        };
        let state = match (stop, exit) {
            (Some(StopCause::Timeout), _) => ProcState::TimedOut,
            (Some(_), _) => ProcState::Killed,
            (None, Exit::Code(_)) => ProcState::Exited,
            (None, Exit::Signal(_)) => ProcState::Signaled,
        };
        Outcome {
            state,
            exit_code,
            signal,
            error: stop.and_then(StopCause::error),
            failure: None,
        }
    }

    /// A command in a session: the status its shell printed for it, or how the shell itself
    /// ended under it (`error` says which); with neither, it is `lost`.
    #[cfg(unix)]
    pub fn of_command(
        stop: Option<StopCause>,
        exit_code: Option<i32>,
        signal: Option<Signal>,
        error: Option<String>,
    ) -> Outcome {
        let state = match (stop, exit_code, signal) {
            (Some(StopCause::Timeout), ..) => ProcState::TimedOut,
            (Some(_), ..) => ProcState::Killed,
            (None, _, Some(_)) => ProcState::Signaled,
            (None, Some(_), None) => ProcState::Exited,
            (None, None, None) => ProcState::Lost,
        };
        Outcome {
            state,
            exit_code,
            signal,
            error: error.or_else(|| stop.and_then(StopCause::error)),
            failure: None,
        }
    }

    /// It never ran: the OS's reason (bad cwd, missing shell, limits that could not be set).
    pub fn failed_to_start(reason: String, failure: StartFailure) -> Outcome {
        Outcome {
            failure: Some(failure),
            ..Outcome::explained(ProcState::FailedToStart, reason)
        }
    }

    /// A person (or the `approval_timeout`) said no: it never started.
    pub fn denied(why: String) -> Outcome {
        Outcome::explained(ProcState::Denied, why)
    }

    /// Stopped on request before it started (it awaited approval).
    pub fn stopped_unstarted(why: String) -> Outcome {
        Outcome::explained(ProcState::Killed, why)
    }

    /// It was running under a daemon that is gone.
    pub fn lost(why: String) -> Outcome {
        Outcome::explained(ProcState::Lost, why)
    }

    /// An end in `state` with no exit status, for the reason `why`.
    fn explained(state: ProcState, why: String) -> Outcome {
        Outcome {
            state,
            exit_code: None,
            signal: None,
            error: Some(why),
            failure: None,
        }
    }

    /// Writes the end into `info` (an explanation it already has stays unless this one has
    /// its own).
    pub fn apply(self, info: &mut ProcessInfo, ended_at_ms: u64) {
        info.state = self.state;
        info.exit_code = self.exit_code;
        info.signal = self.signal;
        info.failure = self.failure;
        if self.error.is_some() {
            info.error = self.error;
        }
        info.ended_at_ms = Some(ended_at_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_is_classified_by_how_it_was_stopped() {
        let code = Exit::Code(3);
        let sig = Exit::Signal(Signal::Term.number());
        assert_eq!(Outcome::of_exit(None, code).state, ProcState::Exited);
        assert_eq!(Outcome::of_exit(None, code).exit_code, Some(3));
        assert_eq!(Outcome::of_exit(None, sig).state, ProcState::Signaled);
        assert_eq!(Outcome::of_exit(None, sig).signal, Some(Signal::Term));
        // Stopped on request: killed, even when it caught the signal and exited.
        let asked = Some(StopCause::Request);
        assert_eq!(Outcome::of_exit(asked, code).state, ProcState::Killed);
        assert_eq!(Outcome::of_exit(asked, code).exit_code, Some(3));
        assert_eq!(
            Outcome::of_exit(Some(StopCause::Shutdown), sig).state,
            ProcState::Killed
        );
        assert_eq!(
            Outcome::of_exit(Some(StopCause::Timeout), sig).state,
            ProcState::TimedOut
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_session_command_without_a_status_is_lost() {
        let o = Outcome::of_command(None, Some(130), None, None);
        assert_eq!((o.state, o.exit_code), (ProcState::Exited, Some(130)));
        let o = Outcome::of_command(Some(StopCause::Request), Some(130), None, None);
        assert_eq!(o.state, ProcState::Killed);
        let o = Outcome::of_command(None, None, None, Some("shell gone".into()));
        assert_eq!(o.state, ProcState::Lost);
    }

    #[test]
    fn applying_keeps_an_earlier_explanation_unless_replaced() {
        let mut info = crate::state::table::tests::row(1);
        info.error = Some("earlier".into());
        Outcome::of_exit(None, Exit::Code(0)).apply(&mut info, 42);
        assert_eq!(info.error.as_deref(), Some("earlier"));
        assert_eq!(info.ended_at_ms, Some(42));
        Outcome::failed_to_start("no shell".into(), StartFailure::NotFound).apply(&mut info, 43);
        assert_eq!(info.error.as_deref(), Some("no shell"));
        assert_eq!(info.state, ProcState::FailedToStart);
    }
}
