//! `prune`: remove the records (and spooled output) of every finished process now.

use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::{Request, Response};

use crate::ctx::Ctx;

#[derive(clap::Args, Debug)]
#[command(after_help = "Finished records are also removed on their own after CUBA_EXEC_TTL (1h).")]
pub struct Args {
    /// Print {"pruned": N}.
    #[arg(long)]
    json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let n = match client.call(Request::Prune).await? {
        Response::Pruned(n) => n,
        other => anyhow::bail!("unexpected reply from cubad: {other:?}"),
    };
    if args.json {
        outln!("{}", serde_json::json!({ "pruned": n }))?;
    } else {
        outln!("removed {n} finished record(s)")?;
    }
    Ok(ExitCode::SUCCESS)
}
