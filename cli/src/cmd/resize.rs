//! `resize ID COLS ROWS`: change the size of a process's terminal (`--tty`).

use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::TtySize;

use crate::cmd::screen::no_terminal;
use crate::ctx::Ctx;
use crate::target::Target;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
The program gets SIGWINCH and sees the new size (`stty size`, $COLUMNS in a new shell); \
full-screen programs redraw. `cubactl attach` does this by itself, to this window's size.")]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// Width in columns.
    #[arg(value_parser = clap::value_parser!(u16).range(1..))]
    cols: u16,
    /// Height in rows.
    #[arg(value_parser = clap::value_parser!(u16).range(1..))]
    rows: u16,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    let size = TtySize {
        cols: args.cols,
        rows: args.rows,
    };
    client
        .resize(id, size)
        .await
        .map_err(|e| no_terminal(e, id))?;
    Ok(ExitCode::SUCCESS)
}
