//! One request to several hosts at once (`hosts`, `ps --all-hosts`): every host is asked
//! concurrently, each within its own bound, so a dead host delays nobody but itself.

use std::future::Future;
use std::time::Duration;

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::hosts::LOCAL;
use futures_util::future::join_all;

use crate::ctx::Ctx;

/// How long one host may take to connect and answer. The bridge's own handshake limit is
/// 30 s; a listing should not wait that long for one host.
pub const BOUND: Duration = Duration::from_secs(20);

/// `local`, then every configured host (by name); with `allowed_only`, only those policy
/// lets this client use.
pub fn names(ctx: &Ctx, allowed_only: bool) -> Vec<String> {
    let hosts = ctx.hosts();
    std::iter::once(LOCAL.to_string())
        .chain(
            hosts
                .all()
                .filter(|h| !allowed_only || hosts.allowed(&h.name))
                .map(|h| h.name.clone()),
        )
        .collect()
}

/// `ask` of each host in `names`, all at once, in `names`' order: its answer, or why there
/// is none (without the host's name: the caller shows it).
pub async fn each<T, F, Fut>(ctx: &Ctx, names: &[String], ask: F) -> Vec<Result<T, String>>
where
    F: Fn(Client) -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    join_all(names.iter().map(|name| {
        let ask = &ask;
        async move {
            let answer = async {
                let client = ctx.connect_to(Some(name)).await?;
                ask(client).await
            };
            match tokio::time::timeout(BOUND, answer).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(reason(&e)),
                Err(_) => Err(format!("no answer within {} s", BOUND.as_secs())),
            }
        }
    }))
    .await
}

/// What went wrong, without the `host NAME:` a bridge error starts with.
pub fn reason(e: &ClientError) -> String {
    match e {
        ClientError::Bridge { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
