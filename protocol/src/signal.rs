//! Signal names as people and agents write them (`TERM`, `SIGTERM`, `sigterm`, `15`).

use std::fmt;
use std::str::FromStr;

use crate::message::Signal;

/// Signal numbers: this OS's where it has signals; elsewhere (Windows) Linux's, the numbers a
/// shell's `128 + n` exit codes and people's `kill -15` mean.
#[cfg(unix)]
mod num {
    pub use libc::{
        SIGABRT as ABRT, SIGALRM as ALRM, SIGBUS as BUS, SIGCONT as CONT, SIGFPE as FPE,
        SIGHUP as HUP, SIGILL as ILL, SIGINT as INT, SIGKILL as KILL, SIGPIPE as PIPE,
        SIGQUIT as QUIT, SIGSEGV as SEGV, SIGSTOP as STOP, SIGTERM as TERM, SIGTRAP as TRAP,
        SIGUSR1 as USR1, SIGUSR2 as USR2, SIGXCPU as XCPU, SIGXFSZ as XFSZ,
    };
}
#[cfg(not(unix))]
mod num {
    pub const HUP: i32 = 1;
    pub const INT: i32 = 2;
    pub const QUIT: i32 = 3;
    pub const ILL: i32 = 4;
    pub const TRAP: i32 = 5;
    pub const ABRT: i32 = 6;
    pub const BUS: i32 = 7;
    pub const FPE: i32 = 8;
    pub const KILL: i32 = 9;
    pub const USR1: i32 = 10;
    pub const SEGV: i32 = 11;
    pub const USR2: i32 = 12;
    pub const PIPE: i32 = 13;
    pub const ALRM: i32 = 14;
    pub const TERM: i32 = 15;
    pub const CONT: i32 = 18;
    pub const STOP: i32 = 19;
    pub const XCPU: i32 = 24;
    pub const XFSZ: i32 = 25;
}

/// The signals a client may name, with this OS's numbers (USR1, STOP and CONT differ between
/// Linux and macOS).
const NAMED: [(Signal, &str, i32); 9] = [
    (Signal::Term, "TERM", num::TERM),
    (Signal::Kill, "KILL", num::KILL),
    (Signal::Int, "INT", num::INT),
    (Signal::Hup, "HUP", num::HUP),
    (Signal::Quit, "QUIT", num::QUIT),
    (Signal::Usr1, "USR1", num::USR1),
    (Signal::Usr2, "USR2", num::USR2),
    (Signal::Stop, "STOP", num::STOP),
    (Signal::Cont, "CONT", num::CONT),
];

/// Signals that can end a process but cannot be requested: named on the wire, so a client on
/// another OS (over a host bridge) reads the same signal whatever its number there.
const ENDING: [(Signal, &str, i32); 10] = [
    (Signal::Ill, "ILL", num::ILL),
    (Signal::Trap, "TRAP", num::TRAP),
    (Signal::Abrt, "ABRT", num::ABRT),
    (Signal::Bus, "BUS", num::BUS),
    (Signal::Fpe, "FPE", num::FPE),
    (Signal::Segv, "SEGV", num::SEGV),
    (Signal::Pipe, "PIPE", num::PIPE),
    (Signal::Alrm, "ALRM", num::ALRM),
    (Signal::Xcpu, "XCPU", num::XCPU),
    (Signal::Xfsz, "XFSZ", num::XFSZ),
];

fn all() -> impl Iterator<Item = &'static (Signal, &'static str, i32)> {
    NAMED.iter().chain(ENDING.iter())
}

impl Signal {
    /// This OS's signal number.
    pub fn number(self) -> i32 {
        match self {
            Signal::Other(n) => n,
            named => all()
                .find(|(s, _, _)| *s == named)
                .map_or(0, |(_, _, n)| *n),
        }
    }

    /// The signal for a number of this OS: named when it has a name.
    pub fn from_number(n: i32) -> Signal {
        all()
            .find(|(_, _, num)| *num == n)
            .map_or(Signal::Other(n), |(s, _, _)| *s)
    }

    /// A signal a client may send (the others only report how a process ended).
    pub fn requestable(self) -> bool {
        NAMED.iter().any(|(s, _, _)| *s == self)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signal::Other(n) => write!(f, "signal {n}"),
            named => {
                let name = all()
                    .find(|(s, _, _)| s == named)
                    .map_or("?", |(_, n, _)| n);
                write!(f, "SIG{name}")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown signal {0:?}: use one of TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT")]
pub struct UnknownSignal(pub String);

impl FromStr for Signal {
    type Err = UnknownSignal;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let upper = t.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some((sig, _, _)) = NAMED.iter().find(|(_, name, _)| *name == bare) {
            return Ok(*sig);
        }
        match t.parse::<i32>() {
            Ok(n) => match Signal::from_number(n) {
                sig if sig.requestable() => Ok(sig),
                _ => Err(UnknownSignal(s.to_string())),
            },
            Err(_) => Err(UnknownSignal(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_parse() {
        for text in ["TERM", "SIGTERM", "sigterm", "15", " term "] {
            assert_eq!(text.parse::<Signal>(), Ok(Signal::Term), "{text}");
        }
        assert_eq!("kill".parse::<Signal>(), Ok(Signal::Kill));
        assert!("SIGFOO".parse::<Signal>().is_err());
        assert!("11".parse::<Signal>().is_err());
    }

    #[test]
    fn numbers_round_trip() {
        for (sig, _, n) in NAMED {
            assert_eq!(sig.number(), n);
            assert_eq!(Signal::from_number(n), sig);
        }
        assert_eq!(Signal::from_number(11), Signal::Segv);
        assert_eq!(Signal::Segv.to_string(), "SIGSEGV");
        assert_eq!(Signal::Segv.number(), 11);
        assert_eq!(Signal::from_number(40), Signal::Other(40));
        assert_eq!(Signal::Other(40).to_string(), "signal 40");
        assert_eq!(Signal::Kill.to_string(), "SIGKILL");
    }
}
