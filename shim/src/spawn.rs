//! What a `run` or `start` call asks of the process it spawns, beyond its own fields: the
//! terminal.

use cuba_protocol::TtySize;

use crate::error::Failure;

/// The terminal a call asks for; `cols` and `rows` only mean something with `tty: true`.
pub fn terminal(
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
