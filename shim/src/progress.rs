//! Long calls (`run`, `wait`) under the request's cancellation token, with progress
//! notifications every few seconds when the client sent a progress token, so clients with
//! short request timeouts keep waiting.

use std::future::Future;
use std::time::Duration;

use cuba_protocol::client::Client;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use rmcp::RoleServer;

/// How long `guarded` waits between progress notifications.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);

pub enum Guarded<T> {
    Done(T),
    Cancelled,
}

/// Runs `fut`; stops at once when the client cancels the request.
pub async fn guarded<T>(
    ctx: &RequestContext<RoleServer>,
    client: &Client,
    id: u64,
    fut: impl Future<Output = T>,
) -> Guarded<T> {
    tokio::pin!(fut);
    let token = ctx.meta.get_progress_token();
    let started = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        tokio::select! {
            out = &mut fut => return Guarded::Done(out),
            _ = ctx.ct.cancelled() => return Guarded::Cancelled,
            _ = ticks.tick(), if token.is_some() => {
                let Some(token) = token.clone() else { continue };
                let secs = started.elapsed().as_secs_f64();
                let bytes = client.info(id).await.map(|i| i.total_bytes()).unwrap_or(0);
                let note = ProgressNotificationParam::new(token, secs)
                    .with_message(format!("process {id} running for {secs:.0}s, {bytes} bytes of output"));
                // A client that stopped listening for progress is not an error.
                let _ = ctx.peer.notify_progress(note).await;
            }
        }
    }
}
