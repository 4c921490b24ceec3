//! `screen ID`: what a process on a terminal (`--tty`) shows right now, as text.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::client::ClientError;
use cuba_protocol::ErrorReason;

use crate::ctx::Ctx;
use crate::target::Target;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
The screen is rendered by the daemon from everything the program wrote, as a terminal would \
show it: a progress bar that redraws itself is one line, a full-screen program (vim, top) \
shows its current screen. Blank rows at the bottom are left out; --json has every row, the \
cursor, the size, the window title and whether the alternate screen is on. Only for processes \
started with --tty; `cubactl tail` shows the output of the others.")]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// Print JSON: {"size": {"cols", "rows"}, "lines": […], "cursor_row", "cursor_col",
    /// "alternate", "title", "cursor" (the output cursor the screen reflects)}.
    #[arg(long)]
    json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    let view = client.screen(id).await.map_err(|e| no_terminal(e, id))?;
    let text = if args.json {
        // The formatted bytes are for painting a terminal, not for reading.
        let json = serde_json::json!({
            "size": view.size,
            "lines": view.lines,
            "cursor_row": view.cursor_row,
            "cursor_col": view.cursor_col,
            "alternate": view.alternate,
            "title": view.title,
            "cursor": view.cursor,
        });
        serde_json::to_string_pretty(&json)? + "\n"
    } else {
        let text = view.text();
        if text.is_empty() {
            text
        } else {
            text + "\n"
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The daemon's INVALID_STATE for a process on pipes, said in cubactl's terms.
pub fn no_terminal(e: ClientError, id: u64) -> anyhow::Error {
    match &e {
        ClientError::Remote(r) if r.reason == Some(ErrorReason::NoTerminal) => anyhow::anyhow!(
            "process {id} has no terminal (it was started without --tty): `cubactl tail {id}` \
             shows its output; `cubactl start --tty -- CMD` starts a command on one"
        ),
        _ => e.into(),
    }
}
