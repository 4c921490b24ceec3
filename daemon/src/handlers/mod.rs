//! Request handlers: one file per request family. Single-answer handlers return a `Response`;
//! streaming ones (follow, watch) send frames through the `Responder` and end with `End`.

mod follow;
mod io;
mod lifecycle;
mod signal;
mod table;
mod wait;

use std::sync::Arc;

use cuba_protocol::{ClientInfo, ErrorKind, ProtocolError, Request, Response, ResponseFrame};
use tokio::sync::mpsc;

use crate::daemon::Daemon;
use crate::policy::Effective;

/// Sends the frames of one request's reply.
#[derive(Clone)]
pub struct Responder {
    pub id: u64,
    pub tx: mpsc::Sender<ResponseFrame>,
}

impl Responder {
    /// False once the connection is gone: the handler should stop.
    pub async fn send(&self, response: Response) -> bool {
        self.tx
            .send(ResponseFrame {
                id: self.id,
                response,
            })
            .await
            .is_ok()
    }
}

/// Runs one request to completion, sending its reply.
/// `policy` is the connection's effective policy (the daemon's, narrowed for this client).
pub async fn dispatch(
    d: Arc<Daemon>,
    client: Arc<ClientInfo>,
    policy: Arc<Effective>,
    request: Request,
    out: Responder,
) {
    let result = match request {
        Request::Spawn(r) => crate::spawn::spawn(&d, &client, &policy, r).map(Response::Process),
        Request::Ensure(r) => {
            crate::spawn::start_or_find(&d, &client, &policy, r, true).map(|r| match r {
                crate::spawn::Reserved::New(p) => Response::Process(p),
                crate::spawn::Reserved::Existing(p) => Response::Existing(p),
            })
        }
        Request::Info(r) => d.get(r.id).map(|p| Response::Process(p.info())),
        Request::Read(r) => io::read(&d, r),
        Request::Stdin(r) => io::stdin(&d, r),
        Request::Wait(r) => wait::wait(&d, r).await,
        Request::Signal(r) => signal::signal(&d, r).await,
        Request::List(r) => Ok(Response::List(table::list(&d, &r))),
        Request::Prune => Ok(Response::Pruned(d.prune(std::time::Duration::ZERO))),
        Request::PolicyCheck(text) => Ok(Response::Policy(policy.check(&text))),
        Request::DaemonStatus => Ok(Response::DaemonStatus(lifecycle::status(&d))),
        Request::Shutdown(r) => {
            // Answer before the daemon starts going down.
            let result = lifecycle::shutdown(&d, r);
            let ok = result.is_ok();
            out.send(result.unwrap_or_else(Response::Error)).await;
            if ok {
                d.shutdown.cancel();
            }
            return;
        }
        Request::Follow(r) => follow::follow(&d, r, &out).await,
        Request::WatchTable(r) => table::watch(&d, r, &out).await,
        // The connection handles cancels itself; one that gets here had nothing to cancel.
        Request::Cancel(_) => Ok(Response::Ok),
        Request::Run(r) => {
            // Spawn and wait in one round trip: the record first (its id), then the wait.
            match crate::spawn::spawn(&d, &client, &policy, r.spawn) {
                Ok(info) => {
                    let id = info.id;
                    if !out.send(Response::Process(info)).await {
                        return;
                    }
                    let wait = cuba_protocol::WaitRequest {
                        id,
                        since: Some(0),
                        spec: r.wait,
                    };
                    wait::wait(&d, wait).await
                }
                Err(e) => Err(e),
            }
        }
        Request::Resize(r) => io::resize(&d, r),
        Request::Screen(r) => io::screen(&d, r.id),
    };
    out.send(result.unwrap_or_else(Response::Error)).await;
}

pub fn bad_request(message: impl Into<String>) -> ProtocolError {
    ProtocolError::new(ErrorKind::BadRequest, message)
}
