//! `start -- CMD`: start a command in the background and print its id at once.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::ProcState;

use crate::ctx::Ctx;
use crate::describe;
use crate::exit;
use crate::spawn_args::SpawnArgs;
use crate::style::Paint;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    spawn: SpawnArgs,
    /// Close the command's stdin at once (it sees EOF), instead of keeping it open for
    /// `cubactl send` and `cubactl attach`. Not with --session: the session's shell reads it.
    #[arg(long, conflicts_with = "session")]
    no_stdin: bool,
    /// Print the new record as JSON instead of the id.
    #[arg(long)]
    json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let req = args.spawn.request(args.no_stdin);
    let (_, info) = ctx
        .once(|c| {
            let req = req.clone();
            async move { c.spawn(req).await }
        })
        .await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&info)?)?;
    }
    if info.state == ProcState::FailedToStart {
        eprintln!("cubactl: {}", describe::sentence(&info));
        return Ok(exit::failed());
    }
    if !args.json {
        outln!("{}", info.id)?;
    }
    if let Some(note) = describe::notice(&info) {
        eprintln!("{}", ctx.err.paint(Some(Paint::Yellow), &note));
    }
    if std::io::stderr().is_terminal() {
        let on = ctx.host.as_ref().map(|h| format!(" on host {h}"));
        let hint = format!(
            "started process {}{} (pid {}): `{cubactl} tail -f {0}` follows it, `{cubactl} kill \
             {0}` stops it",
            info.id,
            on.unwrap_or_default(),
            info.pid,
            cubactl = ctx.cubactl()
        );
        eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &hint));
    }
    Ok(ExitCode::SUCCESS)
}
