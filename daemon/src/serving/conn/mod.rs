//! One client connection: the version handshake (`hello.rs`), then multiplexed requests. Each
//! request runs in its own task, so a long `Wait` never blocks another call on the same
//! connection; one writer task owns the socket's write half. A client that goes away takes its
//! in-flight requests with it (their tasks are aborted); the processes it started keep running.
//! A connection with nothing in flight for `idle_timeout` is closed with a notice (`idle.rs`).

mod hello;
mod idle;
mod trim;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cuba_protocol::{
    wire, ErrorKind, ProtocolError, Request, RequestFrame, Response, ResponseFrame,
};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::codec::Framed;

use crate::platform::transport::{self, Raw};
use crate::serving::daemon::Daemon;
use crate::serving::handlers::{dispatch, Responder};
use crate::state::audit::Peer;
use crate::state::caller::{Caller, Origin};
use hello::Conn;
use idle::Idle;

/// Requests one connection may have in flight; more get a `LIMIT` error.
const MAX_IN_FLIGHT: usize = 256;
/// Replies queued for the writer; a slow reader makes handlers wait, never grows memory.
const OUT_QUEUE: usize = 64;

fn error_frame(id: u64, kind: ErrorKind, message: String) -> ResponseFrame {
    ResponseFrame {
        id,
        response: Response::Error(ProtocolError::new(kind, message)),
    }
}

/// Encodes and writes replies until every sender is gone.
async fn write_replies(
    mut sink: futures_util::stream::SplitSink<Conn, Bytes>,
    mut rx: mpsc::Receiver<ResponseFrame>,
) {
    while let Some(frame) = rx.recv().await {
        // The frames already queued go out in one write (a run that ended at once: its record
        // and its result), so the client wakes once for them.
        let mut next = Some(frame);
        while let Some(frame) = next.take() {
            let body = wire::encode(&frame).or_else(|e| {
                wire::encode(&error_frame(frame.id, ErrorKind::Internal, e.to_string()))
            });
            match body {
                Ok(body) => {
                    if sink.feed(Bytes::from(body)).await.is_err() {
                        return;
                    }
                }
                Err(e) => tracing::error!("cannot encode a reply: {e}"),
            }
            next = rx.try_recv().ok();
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
}

/// `peer`: the connection's SO_PEERCRED, for the audit log; `peer.pid` also places the
/// connection inside one of our process trees or not (`caller::ancestry`), before anything is
/// read from it. `slot`: the connection's place under `max_connections`, given back just before
/// the socket closes, so a client that saw its connection close can connect again at once.
pub async fn serve(d: Arc<Daemon>, stream: Raw, peer: Peer, slot: OwnedSemaphorePermit) {
    let origin = Caller::origin(d.table(), peer);
    // Before the handshake is answered: once it has been, the helper may hide its `/proc`.
    let helper = match origin {
        Origin::Outside => Err(crate::state::genuine::Refusal::new(
            peer.pid.unwrap_or(0),
            "unknown",
            "not from inside a process cuba-exec started",
        )),
        _ => d.genuine().helper(peer.pid),
    };
    let stream = match transport::stream(stream) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot serve a connection: {e}");
            return;
        }
    };
    let mut framed = Framed::new(stream, wire::codec());
    let Some(client) = hello::handshake(d.pid(), &mut framed).await else {
        return;
    };
    tracing::debug!(name = %client.name, pid = client.pid, "client connected");
    let large = hello::env_bytes(&client.env) >= hello::LARGE_ENV;
    // The policy this connection (and everything it starts) is held to, computed once.
    let caller = Caller::new(
        d.table(),
        &d.config().policy,
        (&origin, helper),
        peer,
        client,
    );
    if let Some(by) = caller.policy.narrowed_by() {
        tracing::debug!(name = %caller.client.name, "policy narrowed by {by}");
    }
    let name = caller.client.name.clone();
    d.serving(requests(&d, framed, Arc::new(caller), slot))
        .await;
    tracing::debug!(%name, "client disconnected");
    if large {
        trim::after_large_client();
    }
}

/// How the request loop ended.
enum End {
    /// The client closed, the stream broke, or the daemon shuts down.
    Gone,
    /// Nothing was in flight for the idle timeout: the client is told before the close.
    Idle,
}

/// Reads requests until the client goes away, the daemon shuts down or the connection has been
/// idle too long; each request runs in its own task.
async fn requests(d: &Arc<Daemon>, framed: Conn, caller: Arc<Caller>, slot: OwnedSemaphorePermit) {
    let (sink, mut source) = framed.split();
    let (tx, rx) = mpsc::channel::<ResponseFrame>(OUT_QUEUE);
    let writer = tokio::spawn(write_replies(sink, rx));
    let mut tasks: JoinSet<u64> = JoinSet::new();
    let mut in_flight: HashMap<u64, AbortHandle> = HashMap::new();
    let mut idle = Idle::new(d.config().idle_timeout);
    let end = loop {
        // Biased, in this order: a frame already readable is served before the idle timer is
        // looked at, so a request the client sent in time is never dropped. Once the timer has
        // won, nothing more is read.
        let frame = tokio::select! {
            biased;
            _ = d.shutdown().cancelled() => break End::Gone,
            Some(done) = tasks.join_next() => {
                if let Ok(id) = done {
                    in_flight.remove(&id);
                }
                idle.touch();
                continue;
            }
            frame = source.next() => frame,
            expired = idle.expired(), if tasks.is_empty() => match expired {
                true => break End::Idle,
                false => continue,
            },
        };
        idle.touch();
        let bytes = match frame {
            None => break End::Gone,
            Some(Ok(bytes)) => bytes,
            Some(Err(e)) => {
                // An oversized or broken frame: the stream cannot be resynchronised.
                let msg = format!("unreadable frame, closing the connection: {e}");
                let _ = tx.send(error_frame(0, ErrorKind::BadRequest, msg)).await;
                break End::Gone;
            }
        };
        let RequestFrame { id, request } = match wire::decode::<RequestFrame>(&bytes) {
            Ok(f) => f,
            Err(e) => {
                // Framing is intact: report and keep serving this connection.
                let _ = tx
                    .send(error_frame(0, ErrorKind::BadRequest, e.to_string()))
                    .await;
                continue;
            }
        };
        if let Request::Cancel(target) = request {
            cancel(&tx, &mut in_flight, id, target).await;
            continue;
        }
        if let Some((kind, msg)) = refusal(&in_flight, id) {
            let _ = tx.send(error_frame(id, kind, msg)).await;
            continue;
        }
        tracing::trace!(id, "request");
        let out = Responder { id, tx: tx.clone() };
        let handle = tasks.spawn({
            let (d, caller) = (d.clone(), caller.clone());
            async move {
                dispatch(d, caller, request, out).await;
                id
            }
        });
        in_flight.insert(id, handle);
    };
    tasks.shutdown().await;
    if let End::Idle = end {
        tracing::debug!(name = %caller.client.name, "closing an idle connection");
        // After every reply (each task sent its own before it ended): the client knows that
        // whatever it is still waiting for was never read.
        let _ = tx.send(idle::notice(d.config().idle_timeout)).await;
    }
    drop(tx);
    // Let queued replies (e.g. the answer to `Shutdown`) reach the client.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    drop(slot);
}

/// Cancels request `target` of this connection: it ends with a `Cancelled` error; the cancel
/// (request `id`) itself is answered `Ok` either way.
async fn cancel(
    tx: &mpsc::Sender<ResponseFrame>,
    in_flight: &mut HashMap<u64, AbortHandle>,
    id: u64,
    target: u64,
) {
    if let Some(handle) = in_flight.remove(&target) {
        handle.abort();
        let msg = "request cancelled by the client".to_string();
        let _ = tx
            .send(error_frame(target, ErrorKind::Cancelled, msg))
            .await;
    }
    let _ = tx
        .send(ResponseFrame {
            id,
            response: Response::Ok,
        })
        .await;
}

/// Why request `id` cannot start now: its id is taken, or too many are in flight.
fn refusal(in_flight: &HashMap<u64, AbortHandle>, id: u64) -> Option<(ErrorKind, String)> {
    if in_flight.contains_key(&id) {
        Some((
            ErrorKind::BadRequest,
            format!("request id {id} is already in flight"),
        ))
    } else if in_flight.len() >= MAX_IN_FLIGHT {
        let msg = format!(
            "{MAX_IN_FLIGHT} requests are already in flight on this connection (a `wait` is in \
             flight until its process ends or its wait times out); retry when some have \
             answered, or cancel the ones no longer needed"
        );
        Some((ErrorKind::Limit, msg))
    } else {
        None
    }
}
