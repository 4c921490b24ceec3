//! `Resize`: a new size for a PTY process's terminal (the program gets SIGWINCH), applied by
//! its supervisor to the terminal, its screen and its row.

use cuba_protocol::{ErrorKind, ProtocolError, ResizeRequest, Response};
use tokio::sync::oneshot;

use super::not_a_tty;
use crate::serving::daemon::Daemon;
use crate::state::record::Control;

pub async fn resize(d: &Daemon, r: ResizeRequest) -> Result<Response, ProtocolError> {
    crate::parts::terminal::valid_size(r.size).map_err(ProtocolError::bad_request)?;
    let p = d.table().get(r.id)?;
    let ended = || ProtocolError::invalid_state(format!("process {} has ended", r.id));
    let control = {
        let data = p.lock();
        if data.finished() {
            return Err(ended());
        }
        if data.tty.is_none() {
            return Err(not_a_tty(r.id));
        }
        data.control.clone()
    };
    let control = control.ok_or_else(ended)?;
    let (done, resized) = oneshot::channel();
    control
        .send(Control::Resize { size: r.size, done })
        .await
        .map_err(|_| ended())?;
    match resized.await {
        Ok(Ok(())) => Ok(Response::Ok),
        Ok(Err(e)) => Err(ProtocolError::new(
            ErrorKind::Internal,
            format!("cannot resize the terminal: {e}"),
        )),
        Err(_) => Err(ended()),
    }
}
