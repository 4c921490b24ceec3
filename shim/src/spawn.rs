//! The spawn request of a `run` or `start` call, from the fields the two share: the terminal it
//! asks for and the environment it runs with. Each tool then sets its own fields.

use cuba_protocol::{RequestToken, SpawnRequest, TtySize};

use crate::args::CommandArgs;
use crate::env;
use crate::error::Failure;

impl CommandArgs {
    /// The request to run `command` as these arguments say, with a fresh request token (each
    /// retry of this call sends it unchanged); shell, stdin, name and session are left for the
    /// tool to set. `Err`: `cols` or `rows` without a terminal.
    pub fn spawn_request(self, command: String) -> Result<SpawnRequest, Failure> {
        let tty = terminal(self.tty, self.cols, self.rows)?;
        Ok(SpawnRequest {
            command,
            cwd: self.cwd.map(Into::into),
            env: env::with_defaults(self.env, tty.is_some()),
            tty,
            session: None,
            shell: None,
            stdin: None,
            close_stdin: false,
            timeout_ms: self.timeout_ms,
            name: None,
            side_effects: self.side_effects.unwrap_or_default(),
            token: Some(RequestToken::fresh()),
            port: None,
        })
    }
}

/// The terminal a call asks for; `cols` and `rows` only mean something with `tty: true`.
fn terminal(
    tty: Option<bool>,
    cols: Option<u16>,
    rows: Option<u16>,
) -> Result<Option<TtySize>, Failure> {
    if tty == Some(true) {
        return Ok(Some(TtySize {
            cols: cols.unwrap_or(TtySize::DEFAULT.cols),
            rows: rows.unwrap_or(TtySize::DEFAULT.rows),
        }));
    }
    if cols.is_some() || rows.is_some() {
        return Err(Failure::bad_request(
            "cols and rows size a terminal: pass them with tty: true, or leave them out",
        ));
    }
    Ok(None)
}
