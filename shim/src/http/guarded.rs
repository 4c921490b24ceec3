//! What a request holds while its reply is sent: its places among the requests in flight,
//! its session call (cancelled in its session when the client goes away, for a `wait`), and
//! the end of its caller's token; and what the gate reads of a decoded body.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::tenants::Held;

/// Whether `doc` (a decoded body) asks for a session: an `initialize`, or a batch holding one.
pub(super) fn opens_session(doc: &Value) -> bool {
    let initialize = |m: &Value| m.get("method").and_then(Value::as_str) == Some("initialize");
    match doc {
        Value::Array(batch) => batch.iter().any(initialize),
        one => initialize(one),
    }
}

/// Whether `doc` calls the `wait` tool: cancelling it ends only the wait (the process runs
/// on), so a wait whose client went away is cancelled. Other calls are not: MCP 2025-06-18
/// says a disconnection is no cancellation, and a cancelled `run` stops its process.
pub(super) fn is_wait(doc: &Value) -> bool {
    doc.get("method").and_then(Value::as_str) == Some("tools/call")
        && doc.pointer("/params/name").and_then(Value::as_str) == Some("wait")
}

/// The id of a JSON-RPC request (not a notification, not a batch).
pub(super) fn request_id(doc: &Value) -> Option<Value> {
    let id = doc.get("id").filter(|id| !id.is_null())?;
    doc.get("method")?;
    Some(id.clone())
}

/// A session's request whose reply is being sent.
pub(super) struct Call {
    pub(super) manager: Arc<LocalSessionManager>,
    pub(super) session: Arc<str>,
    pub(super) id: Value,
    /// Cancelled in its session when its client goes away.
    pub(super) cancel: bool,
}

impl Call {
    /// Hands the session `notifications/cancelled` for the request, as a client that is still
    /// there would send: rmcp cancels the call, whose future ends (and its daemon request).
    pub(super) async fn cancel(&self) {
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": self.id, "reason": "the HTTP client went away"},
        });
        let Ok(message) = serde_json::from_value::<ClientJsonRpcMessage>(note) else {
            return;
        };
        let handle = self
            .manager
            .sessions
            .read()
            .await
            .get(&self.session)
            .cloned();
        if let Some(handle) = handle {
            // A session that ended meanwhile has nothing left to cancel.
            let _ = handle.push_message(message, None).await;
        }
    }
}

/// The places a request holds: among all requests in flight, and its caller's.
pub(super) struct Places {
    pub(super) _permit: Option<OwnedSemaphorePermit>,
    pub(super) _held: Held,
}

/// A reply body that holds its request's places until it ends, and ends when its caller's
/// token does. A session call's reply dropped before its end (the client went away) is read
/// on to its end in the background, its places held: the call is still at the daemon, and
/// counts against its caller until it ends (a `wait` is cancelled first, ending it at once).
pub(super) struct Guarded {
    pub(super) body: BoxBody<Bytes, Infallible>,
    pub(super) ended: Pin<Box<WaitForCancellationFutureOwned>>,
    pub(super) done: bool,
    pub(super) call: Option<Call>,
    pub(super) places: Option<Places>,
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.done {
            return Poll::Ready(None);
        }
        // The token was revoked or expired: the stream ends here (its session is being
        // closed, which ends its calls).
        if self.ended.as_mut().poll(cx).is_ready() {
            self.done = true;
            return Poll::Ready(None);
        }
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            self.done = true;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if self.done || self.body.is_end_stream() {
            return;
        }
        let Some(call) = self.call.take() else {
            // Stateless: rmcp cancels the call as its stream is dropped.
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut body = std::mem::replace(&mut self.body, Full::new(Bytes::new()).boxed());
        let never = Box::pin(CancellationToken::new().cancelled_owned());
        let ended = std::mem::replace(&mut self.ended, never);
        let places = self.places.take();
        runtime.spawn(async move {
            if call.cancel {
                call.cancel().await;
            }
            let drained = async { while let Some(Ok(_)) = body.frame().await {} };
            tokio::select! {
                () = drained => {}
                () = ended => {}
            }
            drop(places);
        });
    }
}
