//! `send ID TEXT`: write a line to a process's stdin (or close it with `--eof`).

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::ctx::Ctx;
use crate::target::Target;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// What to write; a newline is added (as if typed and Enter pressed). `-` sends this
    /// command's own stdin as is.
    #[arg(required_unless_present = "eof")]
    text: Option<String>,
    /// Do not add the newline.
    #[arg(short = 'n', long)]
    no_newline: bool,
    /// Close the process's stdin afterwards (it reads EOF).
    #[arg(long)]
    eof: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let data = match args.text.as_deref() {
        Some("-") => {
            let mut all = Vec::new();
            std::io::stdin()
                .read_to_end(&mut all)
                .context("cannot read stdin")?;
            all
        }
        Some(text) => {
            let mut data = text.as_bytes().to_vec();
            if !args.no_newline {
                data.push(b'\n');
            }
            data
        }
        None => Vec::new(),
    };
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    client.stdin(id, data, args.eof).await?;
    Ok(ExitCode::SUCCESS)
}
