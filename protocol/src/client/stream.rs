//! The receiving side of requests: routing reply frames to the request awaiting them, a
//! request's stream of frames (cancelled when dropped), `Run`'s two-part reply and resumable
//! subscriptions.

use std::sync::Mutex;

use tokio::sync::mpsc;

use super::{Client, ClientError, Pending, STREAM_BUFFER};
use crate::message::*;

pub(super) fn unexpected(r: Response) -> ClientError {
    ClientError::Unexpected(format!("{r:?}").chars().take(200).collect())
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the map inconsistent: recover it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hands a reply to the request waiting for it. Never waits: one stream whose reader fell a
/// whole buffer behind must not stall every other reply on the connection, so such a stream is
/// ended instead (its reader sees the connection as closed for that request).
pub(super) fn route(routes: &Pending, reply: ResponseFrame) {
    let tx = lock(routes).get(&reply.id).cloned();
    match tx {
        Some(tx) => {
            let last = matches!(reply.response, Response::End | Response::Error(_));
            if tx.try_send(reply.response).is_err() || last {
                lock(routes).remove(&reply.id);
            }
        }
        None if reply.id == 0 && matches!(reply.response, Response::Error(_)) => {
            // A connection-level error (e.g. an undecodable frame): tell every waiter.
            let all: Vec<_> = lock(routes).drain().map(|(_, tx)| tx).collect();
            for tx in all {
                let _ = tx.try_send(reply.response.clone());
            }
        }
        None => {}
    }
}

/// A process started by [`Client::run`], its wait under way.
pub struct Running {
    /// The process as it started (its id, pid, or the reason it failed to start).
    pub info: ProcessInfo,
    pub(super) stream: ReplyStream,
}

impl Running {
    /// The end of the wait: exit, match, quiet period, waiting for input, or timeout.
    pub async fn result(mut self) -> Result<WaitResult, ClientError> {
        let reply = self.stream.next().await;
        self.stream.done = true;
        match reply {
            Some(Ok(Response::Waited(w))) => Ok(w),
            Some(Ok(other)) => Err(unexpected(other)),
            Some(Err(e)) => Err(e),
            None => Err(ClientError::Closed),
        }
    }
}

/// The frames of one request's reply. Dropping it before its last frame cancels the request.
pub(super) struct ReplyStream {
    pub(super) id: u64,
    pub(super) rx: mpsc::Receiver<Response>,
    pub(super) client: Client,
    /// The last frame arrived (or the request was answered): nothing to cancel.
    pub(super) done: bool,
    /// A frame of the reply arrived: the daemon has seen the request.
    pub(super) answered: bool,
}

impl ReplyStream {
    pub(super) async fn next(&mut self) -> Option<Result<Response, ClientError>> {
        if self.done {
            return None;
        }
        let frame = self.rx.recv().await;
        self.answered |= frame.is_some();
        match frame {
            None if !self.answered && self.client.closed_unseen() => {
                // Closed by the daemon's notice: it never read this request.
                self.done = true;
                Some(Err(ClientError::Gone))
            }
            None => {
                self.done = true;
                Some(Err(self.client.lost(true, ClientError::Closed)))
            }
            Some(Response::End) => {
                self.done = true;
                None
            }
            Some(Response::Error(e)) => {
                self.done = true;
                Some(Err(ClientError::Remote(e)))
            }
            Some(r) => Some(Ok(r)),
        }
    }
}

impl Drop for ReplyStream {
    fn drop(&mut self) {
        lock(&self.client.pending).remove(&self.id);
        if !self.done {
            self.client.cancel(self.id);
        }
    }
}

/// Frames of a streaming reply. Dropping it cancels the stream.
pub struct Subscription {
    pub(super) stream: ReplyStream,
    /// The request, kept up to date (a `Follow`'s cursor) so the stream can be resumed.
    pub(super) request: Request,
}

impl Subscription {
    /// The next frame; `None` once the stream has ended.
    ///
    /// A reader that falls a whole buffer behind has its stream ended by the reply router (so
    /// other replies keep flowing); it is resumed here from the last cursor received, so the
    /// reader sees every byte once, only later.
    pub async fn next(&mut self) -> Option<Result<Response, ClientError>> {
        loop {
            let frame = self.stream.next().await;
            match (&frame, &mut self.request) {
                (Some(Ok(Response::Output(out))), Request::Follow(follow)) => {
                    follow.since = Some(out.next);
                }
                (Some(Ok(Response::Events(batch))), Request::Events(events)) => {
                    events.since = Some(batch.next);
                }
                (Some(Err(ClientError::Closed)), _) if self.stream.client.is_alive() => {
                    // The daemon still streams the old request: stop it.
                    self.stream.client.cancel(self.stream.id);
                    match self
                        .stream
                        .client
                        .send(self.request.clone(), STREAM_BUFFER)
                        .await
                    {
                        Ok(stream) => {
                            self.stream = stream;
                            continue;
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
                _ => {}
            }
            return frame;
        }
    }
}
