//! `daemon reload`: a person confirms hand edits of the remembered approvals and the bearer
//! tokens; the daemon puts them in effect and says what changed, and how the settings file
//! differs from what it runs on (`cubactl daemon restart` applies that).

use std::process::ExitCode;

use anyhow::Result;

use crate::ctx::Ctx;

pub async fn run(ctx: &Ctx) -> Result<ExitCode> {
    let changes = ctx.connect().await?.reload().await?;
    if changes.lines.is_empty() {
        outln!("nothing changed: approvals, tokens and settings are as the daemon uses them")?;
    }
    for line in &changes.lines {
        outln!("{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}
