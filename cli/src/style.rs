//! Colour for people: only on a terminal, never when `NO_COLOR` is set (or `--color never`).

use std::io::IsTerminal;

use clap::ValueEnum;
use cuba_protocol::{ProcState, ProcessInfo};

/// When to use colour.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set or TERM is `dumb`.
    Auto,
    Always,
    Never,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paint {
    Bold,
    Dim,
    Red,
    Green,
    Yellow,
    Cyan,
}

impl Paint {
    fn code(self) -> &'static str {
        match self {
            Paint::Bold => "1",
            Paint::Dim => "2",
            Paint::Red => "31",
            Paint::Green => "32",
            Paint::Yellow => "33",
            Paint::Cyan => "36",
        }
    }
}

/// Whether one output stream gets colour.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub on: bool,
}

impl Style {
    pub fn detect(choice: ColorChoice, is_terminal: bool) -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        let on = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && !no_color && !dumb,
        };
        Style { on }
    }

    pub fn stdout(choice: ColorChoice) -> Style {
        Style::detect(choice, std::io::stdout().is_terminal())
    }

    pub fn stderr(choice: ColorChoice) -> Style {
        Style::detect(choice, std::io::stderr().is_terminal())
    }

    pub fn paint(self, paint: Option<Paint>, text: &str) -> String {
        match paint {
            Some(p) if self.on && !text.is_empty() => format!("\x1b[{}m{text}\x1b[0m", p.code()),
            _ => text.to_string(),
        }
    }
}

/// The colour of a process's state: green running, yellow waiting or stopped on request, red
/// failures, plain for a clean exit.
pub fn of_state(p: &ProcessInfo) -> Option<Paint> {
    match p.state {
        ProcState::Running => Some(Paint::Green),
        ProcState::WaitingInput | ProcState::Killed | ProcState::AwaitingApproval => {
            Some(Paint::Yellow)
        }
        ProcState::Exited if p.exit_code == Some(0) => None,
        ProcState::Exited
        | ProcState::Signaled
        | ProcState::TimedOut
        | ProcState::FailedToStart
        | ProcState::Denied
        | ProcState::Lost => Some(Paint::Red),
    }
}
