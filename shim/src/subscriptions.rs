//! Resource subscriptions, in both eras: `resources/subscribe` (2025: a relay per resource,
//! sent through the connection's peer until `resources/unsubscribe`, the process's end or the
//! connection's) and `subscriptions/listen` (2026-07-28: one relay per listen request for the
//! resources it names). Each relay reads the daemon's event log and tells the client
//! `notifications/resources/updated` for its process; nothing is polled.

use std::collections::HashMap;
use std::sync::Mutex;

use cuba_protocol::EventKind;
use rmcp::model::{ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer};
use tokio::task::AbortHandle;

use crate::resources::{self, follow, id_of, internal};
use crate::CubaExec;

/// Subscriptions one server keeps at most (each is a daemon stream): more are refused.
const MAX_SUBSCRIPTIONS: usize = 256;

/// The legacy subscriptions' relays, by (client, resource).
#[derive(Default)]
pub struct Subscriptions {
    relays: Mutex<HashMap<(String, String), AbortHandle>>,
}

impl Subscriptions {
    fn relays(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), AbortHandle>> {
        // A panic while holding this lock cannot leave the map inconsistent: recover it.
        self.relays.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a `subscriptions/listen` request is granted: the process resources among those it
/// names (at most [`MAX_SUBSCRIPTIONS`]); nothing else is sent.
pub fn accepted(requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
    let ours: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|uri| id_of(uri).is_some())
        .take(MAX_SUBSCRIPTIONS)
        .cloned()
        .collect();
    let mut filter = SubscriptionFilter::new();
    filter.resource_subscriptions = Some(ours);
    Some(filter)
}

fn unknown(uri: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown resource {uri}: expected cuba://process/<id>/output"),
        None,
    )
}

impl CubaExec {
    /// `resources/subscribe`: from now on the client hears of every change to the process's
    /// resource, until it unsubscribes, the process ends or the connection goes.
    pub(crate) async fn subscribe_to(
        &self,
        uri: String,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let id = id_of(&uri).ok_or_else(|| unknown(&uri))?;
        let client = self.link(ctx).client(ctx, None).await.map_err(internal)?;
        // The caller must see the process (the daemon's scope rules say so).
        client
            .info(id)
            .await
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
        let key = (crate::approve::owner_name(ctx), uri.clone());
        {
            let relays = self.subscriptions.relays();
            if relays.len() >= MAX_SUBSCRIPTIONS && !relays.contains_key(&key) {
                return Err(McpError::invalid_request(
                    format!(
                        "{MAX_SUBSCRIPTIONS} resources are subscribed already: unsubscribe \
                         one first"
                    ),
                    None,
                ));
            }
        }
        let mut feed = follow(&client, Some(id)).await?;
        let peer = ctx.peer.clone();
        let relay = tokio::spawn(async move {
            // The connection is held by the feed: the relay lives as long as it does.
            let _client = client;
            while let Some(Ok(batch)) = feed.next().await {
                if batch.events.is_empty() {
                    continue;
                }
                let update = ResourceUpdatedNotificationParam::new(uri.clone());
                if peer.notify_resource_updated(update).await.is_err() {
                    return;
                }
                // Nothing of an ended process changes again.
                if batch
                    .events
                    .iter()
                    .any(|e| matches!(e.kind, EventKind::Exited { .. }))
                {
                    return;
                }
            }
        });
        if let Some(old) = self
            .subscriptions
            .relays()
            .insert(key, relay.abort_handle())
        {
            old.abort();
        }
        Ok(())
    }

    /// `resources/unsubscribe`.
    pub(crate) fn unsubscribe_from(&self, uri: String, ctx: &RequestContext<RoleServer>) {
        let key = (crate::approve::owner_name(ctx), uri);
        if let Some(relay) = self.subscriptions.relays().remove(&key) {
            relay.abort();
        }
    }

    /// `subscriptions/listen`: the accepted resources' changes, until the request ends.
    pub(crate) async fn listen_to(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let wanted: Vec<String> = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        if wanted.is_empty() {
            context.cancelled().await;
            return Ok(());
        }
        let ids: Vec<u64> = wanted.iter().filter_map(|u| id_of(u)).collect();
        let ctx = context.request_context();
        let client = self.link(ctx).client(ctx, None).await.map_err(internal)?;
        let mut feed = follow(&client, None).await?;
        loop {
            let batch = tokio::select! {
                b = feed.next() => b,
                () = context.cancelled() => return Ok(()),
            };
            let Some(Ok(batch)) = batch else {
                return Ok(());
            };
            let mut touched: Vec<u64> = batch
                .events
                .iter()
                .filter_map(|e| e.id)
                .filter(|id| ids.contains(id))
                .collect();
            touched.dedup();
            for id in touched {
                let sent = context
                    .sink()
                    .notify_resource_updated(resources::uri_of(id))
                    .await;
                if sent.is_err() {
                    return Ok(());
                }
            }
        }
    }
}
