//! What a signal means on Windows, which has none. Pure, so it is tested on every OS.
//!
//! `INT`, `TERM`, `HUP` and `QUIT` are a Ctrl-Break in the process's console (each command
//! gets a hidden console and a process group of its own, so the event reaches its tree and
//! nothing else), then after the grace period the job is terminated; `KILL` terminates the job
//! at once. `INT` is not a Ctrl-C: Windows sends a Ctrl-C to every process of a console, never
//! to one process group, and a new process group starts with Ctrl-C disabled. `STOP`, `CONT`, `USR1` and `USR2` have no Windows meaning and are refused
//! with a message naming what works.

use cuba_protocol::Signal;

/// What the daemon does for a signal on Windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A Ctrl-Break event, then `TerminateJobObject` after the grace period if it lives.
    CtrlBreak,
    /// `TerminateJobObject` now.
    Terminate,
}

/// What works, for the refusal.
pub const WORKS: &str = "INT / TERM / HUP / QUIT (Ctrl-Break, then the whole tree is ended \
                         after the grace period) and KILL (the whole tree at once)";

/// The action for `signal`, or why there is none.
pub fn action(signal: Signal) -> Result<Action, String> {
    match signal {
        Signal::Int | Signal::Term | Signal::Hup | Signal::Quit => Ok(Action::CtrlBreak),
        Signal::Kill => Ok(Action::Terminate),
        other => Err(format!(
            "{other} has no meaning on Windows; what works there: {WORKS}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_signal_has_its_windows_action_or_a_refusal_naming_what_works() {
        for s in [Signal::Int, Signal::Term, Signal::Hup, Signal::Quit] {
            assert_eq!(action(s), Ok(Action::CtrlBreak));
        }
        assert_eq!(action(Signal::Kill), Ok(Action::Terminate));
        for s in [Signal::Stop, Signal::Cont, Signal::Usr1, Signal::Usr2] {
            let Err(why) = action(s) else {
                panic!("{s} must be refused")
            };
            assert!(
                why.contains("no meaning on Windows") && why.contains("KILL"),
                "{why}"
            );
        }
    }
}
