//! `Screen`: the rendered screen of a PTY process.

use cuba_protocol::{ProtocolError, Response};

use super::not_a_tty;
use crate::serving::daemon::Daemon;

pub fn screen(d: &Daemon, id: u64) -> Result<Response, ProtocolError> {
    let p = d.table().get(id)?;
    let data = p.lock();
    let tty = data.tty.as_ref().ok_or_else(|| not_a_tty(id))?;
    // Under the record's lock: the screen has seen exactly the output up to `total`.
    Ok(Response::Screen(tty.screen.view(data.output.total())))
}
