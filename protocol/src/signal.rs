//! Signal names as people and agents write them (`TERM`, `SIGTERM`, `sigterm`, `15`).

use std::fmt;
use std::str::FromStr;

use crate::message::Signal;

/// The signals a client may name, with this OS's numbers (USR1, STOP and CONT differ between
/// Linux and macOS).
const NAMED: [(Signal, &str, i32); 9] = [
    (Signal::Term, "TERM", libc::SIGTERM),
    (Signal::Kill, "KILL", libc::SIGKILL),
    (Signal::Int, "INT", libc::SIGINT),
    (Signal::Hup, "HUP", libc::SIGHUP),
    (Signal::Quit, "QUIT", libc::SIGQUIT),
    (Signal::Usr1, "USR1", libc::SIGUSR1),
    (Signal::Usr2, "USR2", libc::SIGUSR2),
    (Signal::Stop, "STOP", libc::SIGSTOP),
    (Signal::Cont, "CONT", libc::SIGCONT),
];

impl Signal {
    /// This OS's signal number.
    pub fn number(self) -> i32 {
        match self {
            Signal::Other(n) => n,
            named => NAMED
                .iter()
                .find(|(s, _, _)| *s == named)
                .map_or(0, |(_, _, n)| *n),
        }
    }

    /// The signal for a number of this OS: named when it is one of ours.
    pub fn from_number(n: i32) -> Signal {
        NAMED
            .iter()
            .find(|(_, _, num)| *num == n)
            .map_or(Signal::Other(n), |(s, _, _)| *s)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signal::Other(n) => match other_name(*n) {
                Some(name) => write!(f, "SIG{name}"),
                None => write!(f, "signal {n}"),
            },
            named => {
                let name = NAMED
                    .iter()
                    .find(|(s, _, _)| s == named)
                    .map_or("?", |(_, n, _)| n);
                write!(f, "SIG{name}")
            }
        }
    }
}

/// Names of signals that can end a process but cannot be requested.
fn other_name(n: i32) -> Option<&'static str> {
    const OTHERS: [(i32, &str); 10] = [
        (libc::SIGILL, "ILL"),
        (libc::SIGTRAP, "TRAP"),
        (libc::SIGABRT, "ABRT"),
        (libc::SIGBUS, "BUS"),
        (libc::SIGFPE, "FPE"),
        (libc::SIGSEGV, "SEGV"),
        (libc::SIGPIPE, "PIPE"),
        (libc::SIGALRM, "ALRM"),
        (libc::SIGXCPU, "XCPU"),
        (libc::SIGXFSZ, "XFSZ"),
    ];
    OTHERS
        .iter()
        .find(|(num, _)| *num == n)
        .map(|(_, name)| *name)
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
                Signal::Other(_) => Err(UnknownSignal(s.to_string())),
                sig => Ok(sig),
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
        assert_eq!(Signal::from_number(11), Signal::Other(11));
        assert_eq!(Signal::Other(11).to_string(), "SIGSEGV");
        assert_eq!(Signal::Kill.to_string(), "SIGKILL");
    }
}
