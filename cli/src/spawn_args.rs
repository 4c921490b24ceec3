//! Options shared by `run` and `start`, and how the command words become shell text.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use cuba_protocol::{RequestToken, SpawnRequest, TtySize};

use crate::{term, units};

#[derive(Args, Debug)]
pub struct SpawnArgs {
    /// A label shown in `ps` (it need not be unique).
    #[arg(long, short = 'N', value_name = "NAME")]
    pub name: Option<String>,
    /// Working directory [default: the current one; on another host (--host) the host's
    /// `cwd`, else the home directory there].
    #[arg(long, short = 'C', value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Stop the whole tree after this long (TERM, grace period, KILL); its state becomes
    /// `timed_out`. Examples: 30s, 500ms, 10m, 1h.
    #[arg(long, short = 't', value_name = "DURATION", value_parser = units::parse_duration)]
    pub timeout: Option<Duration>,
    /// Set an environment variable for the command (repeatable). The rest of the environment
    /// is this shell's (on another host, the remote user's).
    #[arg(long, short = 'e', value_name = "KEY=VALUE", value_parser = parse_env)]
    pub env: Vec<(OsString, OsString)>,
    /// Shell that runs the command as `SHELL -c TEXT` [default: /bin/sh].
    #[arg(long, value_name = "PATH")]
    pub shell: Option<String>,
    /// Declare a side effect of the command (repeatable), in YieldShell's categories, e.g.
    /// MAKES_NETWORK_REQUESTS or DELETES_FILES. The daemon refuses a command that declares a
    /// category it blocks (CUBA_EXEC_BLOCKED_SIDE_EFFECTS); declarations are not verified.
    #[arg(long = "side-effect", value_name = "CATEGORY")]
    pub side_effects: Vec<String>,
    /// Run on a pseudo-terminal instead of pipes: the command sees a terminal (colours,
    /// prompts, line editing, full-screen programs) and its output is one stream.
    /// `cubactl screen ID` shows what it displays, `cubactl attach ID` takes it over.
    #[arg(long)]
    pub tty: bool,
    /// Columns of the --tty terminal [default: this terminal's, else 120].
    #[arg(long, value_name = "N", requires = "tty", value_parser = clap::value_parser!(u16).range(1..))]
    pub cols: Option<u16>,
    /// Rows of the --tty terminal [default: this terminal's, else 40].
    #[arg(long, value_name = "N", requires = "tty", value_parser = clap::value_parser!(u16).range(1..))]
    pub rows: Option<u16>,
    /// Run in the persistent shell session NAME (a long-lived shell, started on first use):
    /// `cd`, exports and functions carry over to the next command of the same session. The
    /// command still gets its own output and exit code; one command runs at a time.
    /// `cubactl kill NAME` closes the session.
    #[arg(long, value_name = "NAME", conflicts_with = "tty")]
    pub session: Option<String>,
    /// The command. One word is shell text, run as is (`'make && ./app'`); several words are
    /// quoted one by one, so `run -- grep "a b" file` works as it would typed in your shell.
    /// Options for cubactl go before it; after the first word of the command everything is
    /// the command's, and after `--` too (`run -- -x` runs `-x`). A word before it that starts
    /// with `-` is an option of cubactl's: a misspelt one is an error, never the command.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl SpawnArgs {
    /// The request, with a fresh request token: send this value (clones of it) on every retry.
    pub fn request(&self, close_stdin: bool) -> SpawnRequest {
        SpawnRequest {
            command: shell_text(&self.command),
            cwd: self.cwd.clone().map(PathBuf::into_os_string),
            env: self.env.clone(),
            shell: self.shell.clone(),
            stdin: None,
            close_stdin,
            timeout_ms: self.timeout.map(|t| t.as_millis() as u64),
            name: self.name.clone(),
            side_effects: self.side_effects.clone(),
            tty: self.tty_size(),
            session: self.session.clone(),
            token: Some(RequestToken::fresh()),
            port: None,
        }
    }

    /// The --tty terminal's size: --cols/--rows, else this terminal's when stdout is one (the
    /// output will be shown here), else the default.
    pub fn tty_size(&self) -> Option<TtySize> {
        if !self.tty {
            return None;
        }
        let here = std::io::IsTerminal::is_terminal(&std::io::stdout())
            .then(term::size)
            .flatten()
            .unwrap_or(TtySize::DEFAULT);
        Some(TtySize {
            cols: self.cols.unwrap_or(here.cols),
            rows: self.rows.unwrap_or(here.rows),
        })
    }
}

fn parse_env(text: &str) -> Result<(OsString, OsString), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.into(), v.into())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// One word as is; several words each quoted where needed: for `sh`, or on Windows as its
/// programs read their command line (`cmd.exe` and PowerShell keep double quotes whole).
pub fn shell_text(words: &[String]) -> String {
    if let [one] = words {
        return one.clone();
    }
    let quote = match cfg!(windows) {
        true => quote_windows,
        false => quote,
    };
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// A word in double quotes by the MSVC runtime's rules, unless it needs none.
fn quote_windows(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@\\".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        return word.to_string();
    }
    let mut out = String::new();
    cuba_protocol::cmdline::push_quoted(&mut out, word);
    out
}

fn quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn windows_words_are_quoted_as_its_programs_read_them() {
        assert_eq!(quote_windows(r"C:\bin\x.exe"), r"C:\bin\x.exe");
        assert_eq!(
            quote_windows(r"C:\Program Files\x"),
            r#""C:\Program Files\x""#
        );
        assert_eq!(quote_windows(r#"say "hi""#), r#""say \"hi\"""#);
        assert_eq!(quote_windows(r"dir\ "), r#""dir\ ""#);
        assert_eq!(quote_windows(r"end\"), r"end\");
        assert_eq!(quote_windows(r"a b\"), r#""a b\\""#);
        assert_eq!(quote_windows(""), r#""""#);
    }

    #[test]
    fn one_word_is_shell_text_several_are_quoted() {
        assert_eq!(shell_text(&words(&["make && ./app"])), "make && ./app");
        let several = shell_text(&words(&["grep", "a b", "--x=1"]));
        match cfg!(windows) {
            true => assert_eq!(several, r#"grep "a b" --x=1"#),
            false => assert_eq!(several, r"grep 'a b' --x=1"),
        }
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn env_pairs_parse() {
        assert_eq!(parse_env("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert!(parse_env("=x").is_err());
        assert!(parse_env("novalue").is_err());
    }
}
