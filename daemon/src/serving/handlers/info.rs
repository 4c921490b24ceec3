//! `Info`: one process's record.

use cuba_protocol::{ProtocolError, Response};

use crate::serving::daemon::Daemon;

pub fn info(d: &Daemon, id: u64) -> Result<Response, ProtocolError> {
    Ok(Response::Process(d.table().get(id)?.info()))
}
