//! `Read`: output since a cursor, or the tail.

use cuba_protocol::{ProtocolError, ReadRequest, Response};

use crate::serving::daemon::Daemon;

pub fn read(d: &Daemon, r: ReadRequest) -> Result<Response, ProtocolError> {
    let p = d.table().get(r.id)?;
    let max = r.max_bytes.min(cuba_protocol::wire::MAX_OUTPUT_PER_FRAME);
    let out = p.lock().output.read(r.since, u64::from(max), r.stream);
    Ok(Response::Output(out))
}
