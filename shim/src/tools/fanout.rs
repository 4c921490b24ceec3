//! `run` and `start` on a host group (`host="web*"`, `"a,b"`, `["a","b"]`): every host of it
//! through the one-host path, at most `Hosts::parallel()` at once. A host that cannot be
//! reached is a result like the others, never the end of the call. The reply is
//! `reply::group_result`'s: failures first, identical outputs once.
//!
//! A group's call neither asks the person through the client (one question per host would
//! queue forms, and a 2026 `input_required` result can carry one call's only) nor becomes an
//! MCP task (a task is one process): a held command is reported with the `cubactl approve` it
//! waits for, and a command running at `yield_ms` with its host and id.

use std::future::Future;
use std::time::Instant;

use futures_util::StreamExt;
use rmcp::model::{CallToolResult, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use crate::error::Failure;
use crate::progress::PROGRESS_EVERY;
use crate::reply::{group_result, GroupFacts, HostOutcome, ProcessReply};
use crate::server::CubaExec;

/// The reply's bound on output, in hosts' bounds (`max_output`): a failure's output and the
/// others' fit whole; past it a section keeps its hosts and ids and says where its output is.
const BUDGET_HOSTS: u64 = 2;

/// Why a group's command held for the person was not put to them through the client.
pub(super) const NOT_ASKED: &str = "a call on a host group does not ask through the client";

/// The progress token's key in a request's `_meta`.
const PROGRESS_TOKEN: &str = "progressToken";

impl CubaExec {
    /// Runs `each(ctx, host)` for every host `group` names, at most [`Hosts::parallel`] at
    /// once, and folds the results into one reply (`max`: a host's output bound). `Err`: the
    /// group names no host it may use (unknown, not allowed, no match).
    ///
    /// [`Hosts::parallel`]: cuba_protocol::hosts::Hosts::parallel
    pub(super) async fn fan_out<F, Fut>(
        &self,
        ctx: &RequestContext<RoleServer>,
        group: &str,
        max: u64,
        each: F,
    ) -> Result<CallToolResult, Failure>
    where
        F: Fn(RequestContext<RoleServer>, String) -> Fut,
        Fut: Future<Output = Result<ProcessReply, Failure>>,
    {
        let link = self.link(ctx);
        let names = link.hosts().group(group).map_err(|e| {
            let why = link.hosts_error().map_or(String::new(), |h| {
                format!(" (hosts are not configured: {h})")
            });
            Failure::bad_request(format!("{e}{why}. list_hosts shows the hosts there are."))
        })?;
        let parallel = link.hosts().parallel();
        let started = Instant::now();
        // Each host's call without the progress token: the group reports one count of hosts
        // done, which only grows (each host's own seconds would not, across hosts).
        let mut quiet = ctx.clone();
        quiet.meta.remove(PROGRESS_TOKEN);
        let total = names.len();
        let each = &each;
        let calls = names.into_iter().enumerate().map(|(i, host)| {
            let ctx = quiet.clone();
            async move {
                // Cancelled before its turn came: nothing is started there. (Those under way
                // stop their own process, as a cancelled one-host call does.)
                let reply = match ctx.ct.is_cancelled() {
                    true => Err(Failure::new(
                        "CANCELLED",
                        "not started there: the request was cancelled",
                    )),
                    false => each(ctx, host.clone()).await,
                };
                (i, HostOutcome { host, reply })
            }
        });
        let mut results = futures_util::stream::iter(calls).buffer_unordered(parallel);
        let token = ctx.meta.get_progress_token();
        let first = tokio::time::Instant::now() + PROGRESS_EVERY;
        let mut ticks = tokio::time::interval_at(first, PROGRESS_EVERY);
        let mut done = Vec::with_capacity(total);
        loop {
            tokio::select! {
                next = results.next() => match next {
                    Some(result) => done.push(result),
                    None => break,
                },
                _ = ticks.tick(), if token.is_some() => {
                    let Some(token) = token.clone() else { continue };
                    let note = ProgressNotificationParam::new(token, done.len() as f64)
                        .with_total(total as f64)
                        .with_message(format!(
                            "{} of {total} hosts done after {:.0}s",
                            done.len(),
                            started.elapsed().as_secs_f64()
                        ));
                    // A client that stopped listening for progress is not an error.
                    let _ = ctx.peer.notify_progress(note).await;
                }
            }
        }
        done.sort_by_key(|(i, _)| *i);
        let outcomes = done.into_iter().map(|(_, o)| o).collect();
        let facts = GroupFacts {
            parallel,
            time_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            budget: usize::try_from(max.saturating_mul(BUDGET_HOSTS)).unwrap_or(usize::MAX),
        };
        Ok(group_result(outcomes, facts))
    }
}
