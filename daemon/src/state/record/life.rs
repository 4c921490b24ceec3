//! Where a record is in its life, as one value: not started, running, or ended with its
//! outcome. The row's state, exit status, explanation and end time are rendered from it (and
//! from the questions waiting on it), never written apart from it.

use cuba_protocol::{AskKind, ProcState, ProcessInfo};

use super::{Outcome, ProcData};

/// Where a record is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Life {
    /// Its process is being launched.
    Reserved,
    /// Its process has not started: held until a person approves it.
    Held,
    /// Its process runs; `waiting_input`: a member of its tree is blocked reading its input.
    Running { waiting_input: bool },
    /// It has ended, as its outcome says.
    Ended(Outcome),
}

impl Life {
    /// The life a row shows: a journalled or handed-over one.
    pub fn of_row(info: &ProcessInfo) -> Life {
        match info.state {
            s if s.is_finished() => Life::Ended(Outcome {
                state: s,
                exit_code: info.exit_code,
                signal: info.signal,
                error: info.error.clone(),
                failure: info.failure,
            }),
            ProcState::WaitingInput => Life::Running {
                waiting_input: true,
            },
            _ => Life::Running {
                waiting_input: false,
            },
        }
    }
}

impl ProcData {
    /// Its process started.
    pub fn started(&mut self) {
        if matches!(self.life, Life::Reserved | Life::Held) {
            self.set_life(Life::Running {
                waiting_input: false,
            });
        }
    }

    /// It ended with `outcome` at `at_ms` (an explanation it had stays unless `outcome` has
    /// its own). False, and nothing changed, if it had ended.
    pub fn end(&mut self, outcome: Outcome, at_ms: u64) -> bool {
        if self.finished() {
            return false;
        }
        if outcome.error.is_some() {
            self.info.error = outcome.error.clone();
        }
        self.info.ended_at_ms = Some(at_ms);
        self.set_life(Life::Ended(outcome));
        true
    }

    /// A member of its tree is blocked reading its input (`true`), or it got something to
    /// react to (input, a new size, output). Returns whether it was waiting before.
    pub fn waiting_input(&mut self, now: bool) -> bool {
        let Life::Running { waiting_input } = self.life else {
            return false;
        };
        if waiting_input != now {
            self.set_life(Life::Running { waiting_input: now });
        }
        waiting_input
    }

    pub(super) fn set_life(&mut self, life: Life) {
        self.life = life;
        self.render();
    }

    /// Writes the row's state, exit status and end from the life and the questions waiting.
    pub(super) fn render(&mut self) {
        let asks = &self.info.asks;
        let approval = asks.iter().any(|a| a.kind.holds());
        let password = asks.iter().any(|a| a.kind == AskKind::Password);
        let info = &mut self.info;
        match &self.life {
            Life::Ended(o) => {
                info.state = o.state;
                info.exit_code = o.exit_code;
                info.signal = o.signal;
                info.failure = o.failure;
                return;
            }
            // Until its launch, even once the person has answered.
            Life::Held => info.state = ProcState::AwaitingApproval,
            // Being launched: shown as it will be a moment later.
            Life::Reserved => info.state = ProcState::Running,
            Life::Running { waiting_input } => {
                info.state = match (approval, password || *waiting_input) {
                    (true, _) => ProcState::AwaitingApproval,
                    (false, true) => ProcState::WaitingInput,
                    (false, false) => ProcState::Running,
                }
            }
        }
        info.exit_code = None;
        info.signal = None;
        info.failure = None;
        info.ended_at_ms = None;
    }
}

#[cfg(test)]
mod tests {
    use cuba_protocol::{AskKind, ProcState};

    use super::super::note::ask;
    use super::*;
    use crate::parts::output::Output;
    use crate::platform::Exit;

    fn state(rec: &ProcData) -> ProcState {
        rec.info().state
    }

    #[test]
    fn the_row_is_rendered_from_the_life_and_the_questions_waiting() {
        let row = crate::state::table::tests::row(1);
        let mut rec = ProcData::reserved(row, Output::new(1 << 20, None));
        assert_eq!(
            (&rec.life, state(&rec)),
            (&Life::Reserved, ProcState::Running)
        );
        // Held for a person: awaiting approval until it is launched.
        rec.asked(ask(1, AskKind::Command));
        assert_eq!(state(&rec), ProcState::AwaitingApproval);
        rec.settled(1);
        assert_eq!(state(&rec), ProcState::AwaitingApproval);
        rec.started();
        assert_eq!(state(&rec), ProcState::Running);
        // Running: a question for approval comes before a password, which comes before a read
        // of its input; input that comes clears only the read.
        assert!(!rec.waiting_input(true));
        assert_eq!(state(&rec), ProcState::WaitingInput);
        rec.asked(ask(2, AskKind::Password));
        rec.asked(ask(3, AskKind::Exec));
        assert_eq!(state(&rec), ProcState::AwaitingApproval);
        rec.settled(3);
        assert!(rec.moved_on(), "it was waiting for input");
        assert_eq!(
            state(&rec),
            ProcState::WaitingInput,
            "the password is still asked"
        );
        rec.settled(2);
        assert_eq!(state(&rec), ProcState::Running);
        // Ended once, with its status; later changes change nothing.
        assert!(rec.end(Outcome::of_exit(None, Exit::Code(3)), 9));
        assert!(!rec.end(Outcome::lost("again".into()), 10));
        assert!(!rec.waiting_input(true));
        rec.started();
        let info = rec.snapshot();
        assert_eq!(
            (info.state, info.exit_code, info.ended_at_ms),
            (ProcState::Exited, Some(3), Some(9))
        );
    }

    #[test]
    fn a_journalled_row_comes_back_with_its_life() {
        let mut row = crate::state::table::tests::row(1);
        Outcome::lost("cubad stopped".into()).apply(&mut row, 7);
        let rec = ProcData::new(row.clone(), Output::new(1 << 20, None), true);
        assert!(rec.finished());
        let info = rec.snapshot();
        assert_eq!((info.state, info.ended_at_ms), (ProcState::Lost, Some(7)));
        assert_eq!(info.error.as_deref(), Some("cubad stopped"));
        row = crate::state::table::tests::row(2);
        row.state = ProcState::WaitingInput;
        let rec = ProcData::new(row, Output::new(1 << 20, None), false);
        assert_eq!(
            rec.life,
            Life::Running {
                waiting_input: true
            }
        );
    }
}
