//! `daemon start`: start cubad unless one already answers on the socket.

use std::process::ExitCode;

use anyhow::{Context, Result};
use cuba_protocol::client::start_daemon;

use super::absent;
use crate::ctx::Ctx;

pub async fn run(ctx: &Ctx) -> Result<ExitCode> {
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
