//! `daemon start`: start cubad unless one already answers on the socket. On another host
//! (`--host`) its bridge starts the daemon there when none runs: connecting is starting.

use std::process::ExitCode;

use anyhow::{Context, Result};
use cuba_protocol::client::start_daemon;

use super::absent;
use crate::ctx::Ctx;

pub async fn run(ctx: &Ctx) -> Result<ExitCode> {
    if ctx.is_remote() {
        return remote(ctx, "cubad is running on").await;
    }
    match ctx.connect_existing().await {
        Ok(c) => {
            let w = c.welcome();
            outln!(
                "cubad is already running (pid {}, version {})",
                w.daemon_pid,
                w.daemon_version
            )?;
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) if absent(&e) => {}
        Err(e) => return Err(e.into()),
    }
    started(ctx, "started").await
}

/// Connects to another host's daemon (its bridge starts one if none runs) and says which
/// one answers: `{what} host NAME (pid …, version …)`.
pub async fn remote(ctx: &Ctx, what: &str) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let w = client.welcome();
    outln!(
        "{what} host {} (pid {}, version {})",
        ctx.host_name(),
        w.daemon_pid,
        w.daemon_version
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Starts the daemon and says which one answers.
pub async fn started(ctx: &Ctx, verb: &str) -> Result<ExitCode> {
    start_daemon(&ctx.socket).await?;
    let client = ctx
        .connect_existing()
        .await
        .context("cubad started but does not answer")?;
    let w = client.welcome();
    outln!(
        "{verb} cubad (pid {}, version {}) on {}",
        w.daemon_pid,
        w.daemon_version,
        ctx.socket.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
