//! One pipe client: the version handshake, then multiplexed requests, each in its own task (a
//! long `Wait` never blocks another call). One task writes the replies. A client that goes away
//! takes its requests with it; the processes it started keep running.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cuba_protocol::handshake::{self, HelloOutcome};
use cuba_protocol::{
    wire, ClientInfo, ErrorKind, ProtocolError, Request, RequestFrame, Response, ResponseFrame,
    Welcome, VERSION,
};
use futures_util::{SinkExt, StreamExt};
use tokio::net::windows::named_pipe::NamedPipeServer;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_util::codec::Framed;

use super::client::{Client, Responder};
use super::Daemon;
use crate::policy::Effective;

/// Largest first frame (a client's environment and its name and cwd).
const MAX_HELLO_FRAME: usize = 2 * 1024 * 1024;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Requests one connection may have in flight; more get a `LIMIT` error.
const MAX_IN_FLIGHT: usize = 256;
/// Replies queued for the writer: a slow reader makes handlers wait, never grows memory.
const OUT_QUEUE: usize = 64;

type Conn = Framed<NamedPipeServer, tokio_util::codec::LengthDelimitedCodec>;

pub async fn serve(d: Arc<Daemon>, pipe: NamedPipeServer, peer_pid: u32) {
    let mut framed = Framed::new(pipe, wire::codec());
    let Some(info) = hello(&mut framed, peer_pid).await else {
        return;
    };
    let who = format!("{} (pid {})", info.name, info.pid);
    let policy = Effective::daemon(&d.config.policy).narrow_env(&who, &info.env);
    let client = Arc::new(Client { info, policy });
    d.clients.fetch_add(1, Ordering::Relaxed);
    requests(&d, &client, framed).await;
    d.clients.fetch_sub(1, Ordering::Relaxed);
}

/// Reads and answers the hello; `None` when the connection ends here.
async fn hello(framed: &mut Conn, peer_pid: u32) -> Option<ClientInfo> {
    framed.codec_mut().set_max_frame_length(MAX_HELLO_FRAME);
    let first = match tokio::time::timeout(HANDSHAKE_TIMEOUT, framed.next()).await {
        Ok(Some(Ok(frame))) => frame,
        Ok(Some(Err(e))) => {
            refuse(framed, &format!("bad handshake frame: {e}")).await;
            return None;
        }
        _ => return None,
    };
    framed.codec_mut().set_max_frame_length(wire::MAX_FRAME);
    let pid = Daemon::pid();
    match handshake::decode_hello(&first) {
        Ok(HelloOutcome::Ok(hello)) if hello.remote => {
            refuse(framed, "cubad on Windows does not take remote clients yet").await;
            None
        }
        Ok(HelloOutcome::Ok(mut hello)) => {
            // The pipe says who is there; the hello only what it calls itself.
            hello.client.pid = peer_pid;
            let welcome = Welcome {
                daemon_version: VERSION.to_string(),
                daemon_pid: pid,
                env: Vec::new(),
            };
            let frame = handshake::encode_welcome(&welcome).ok()?;
            framed.send(Bytes::from(frame)).await.ok()?;
            Some(hello.client)
        }
        Ok(HelloOutcome::WrongVersion(theirs)) => {
            let reason = format!(
                "this daemon speaks protocol version {}, the client {theirs}",
                cuba_protocol::PROTOCOL_VERSION
            );
            refuse(framed, &reason).await;
            None
        }
        Err(e) => {
            refuse(framed, &format!("bad handshake: {e}")).await;
            None
        }
    }
}

async fn refuse(framed: &mut Conn, reason: &str) {
    let frame = handshake::encode_refusal(Daemon::pid(), reason);
    let _ = tokio::time::timeout(HANDSHAKE_TIMEOUT, framed.send(Bytes::from(frame))).await;
}

async fn requests(d: &Arc<Daemon>, client: &Arc<Client>, framed: Conn) {
    let (sink, mut stream) = framed.split();
    let (tx, rx) = mpsc::channel::<ResponseFrame>(OUT_QUEUE);
    let writer = tokio::spawn(write_replies(sink, rx));
    let mut in_flight: HashMap<u64, AbortHandle> = HashMap::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut stop = d.stop.subscribe();
    loop {
        let frame = tokio::select! {
            frame = stream.next() => frame,
            Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                let id = match done { Ok((id, ())) => id, Err(e) => e.id() };
                in_flight.retain(|_, h| h.id() != id);
                continue;
            }
            _ = stop.wait_for(|s| *s) => break,
        };
        let Some(Ok(bytes)) = frame else { break };
        let frame: RequestFrame = match wire::decode(&bytes) {
            Ok(f) => f,
            Err(e) => {
                let error = ProtocolError::bad_request(format!("cannot decode request: {e}"));
                let _ = tx.send(error_frame(0, error)).await;
                continue;
            }
        };
        let id = frame.id;
        if let Request::Cancel(target) = frame.request {
            if let Some(h) = in_flight.remove(&target) {
                h.abort();
                let cancelled = ProtocolError::new(ErrorKind::Cancelled, "cancelled");
                let _ = tx.send(error_frame(target, cancelled)).await;
            }
            let _ = tx
                .send(ResponseFrame {
                    id,
                    response: Response::Ok,
                })
                .await;
            continue;
        }
        if in_flight.len() >= MAX_IN_FLIGHT {
            let limit = ProtocolError::new(
                ErrorKind::Limit,
                format!(
                    "{MAX_IN_FLIGHT} requests are already in flight on this connection; retry \
                     when some have answered, or cancel the ones no longer needed"
                ),
            );
            let _ = tx.send(error_frame(id, limit)).await;
            continue;
        }
        let out = Responder::new(id, tx.clone());
        let (d, client) = (d.clone(), client.clone());
        let handle = tasks.spawn(async move {
            super::handlers::handle(&d, &client, frame.request, out).await;
        });
        in_flight.insert(id, handle);
    }
    tasks.abort_all();
    drop(tx);
    let _ = writer.await;
}

fn error_frame(id: u64, error: ProtocolError) -> ResponseFrame {
    ResponseFrame {
        id,
        response: Response::Error(error),
    }
}

async fn write_replies(
    mut sink: futures_util::stream::SplitSink<Conn, Bytes>,
    mut rx: mpsc::Receiver<ResponseFrame>,
) {
    while let Some(frame) = rx.recv().await {
        let body = wire::encode(&frame).or_else(|e| {
            let internal = ProtocolError::new(ErrorKind::Internal, e.to_string());
            wire::encode(&error_frame(frame.id, internal))
        });
        let Ok(body) = body else { continue };
        if sink.send(Bytes::from(body)).await.is_err() {
            return;
        }
    }
}
