//! The event log: one batch, a followed feed of them, and a pattern watched on a process's
//! output.

use super::stream::unexpected;
use super::{Client, ClientError, Subscription};
use crate::message::*;

impl Client {
    /// One batch of the event log ([`Request::Events`] without `follow`).
    pub async fn events(&self, mut req: EventsRequest) -> Result<EventBatch, ClientError> {
        req.follow = false;
        match self.call(Request::Events(req)).await? {
            Response::Events(batch) => Ok(batch),
            other => Err(unexpected(other)),
        }
    }

    /// The event log followed: [`EventFeed::next`] gives the backlog, then each new batch as
    /// it happens. Dropping it cancels the request.
    pub async fn follow_events(&self, mut req: EventsRequest) -> Result<EventFeed, ClientError> {
        req.follow = true;
        Ok(EventFeed {
            sub: self.subscribe(Request::Events(req)).await?,
        })
    }

    /// Watches process `id`'s output for `pattern`: each new matching line is an event.
    pub async fn notify(&self, req: NotifyRequest) -> Result<(), ClientError> {
        match self.call(Request::Notify(req)).await? {
            Response::Ok => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}

/// A followed event log ([`Client::follow_events`]): its batches, resumed from the last cursor
/// if the reader fell behind. Dropping it cancels the request.
pub struct EventFeed {
    sub: Subscription,
}

impl EventFeed {
    /// The next batch; `None` once the daemon ended the stream (it shuts down).
    pub async fn next(&mut self) -> Option<Result<EventBatch, ClientError>> {
        match self.sub.next().await? {
            Ok(Response::Events(batch)) => Some(Ok(batch)),
            Ok(other) => Some(Err(unexpected(other))),
            Err(e) => Some(Err(e)),
        }
    }
}
