//! `logs ID`: a process's whole output from the spool, for a pager or a file.

use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::wire::MAX_OUTPUT_PER_FRAME;
use cuba_protocol::ReadRequest;

use crate::cmd::tail;
use crate::ctx::Ctx;
use crate::print::Sink;
use crate::target::Target;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// Remove ANSI escape sequences (colours, cursor movement): plain text for `less`, grep
    /// or a file.
    #[arg(long)]
    plain: bool,
    /// Only what it wrote to stdout.
    #[arg(long, conflicts_with = "stderr")]
    stdout: bool,
    /// Only what it wrote to stderr.
    #[arg(long)]
    stderr: bool,
    /// Print JSON lines: {"stream": "stdout", "text": "…"}.
    #[arg(long)]
    json: bool,
    /// Start at this cursor of the output: an error line's (`cubactl info`, the `@N` of an
    /// MCP reply's `errors:` header) or an MCP reply's `next`.
    #[arg(long, value_name = "CURSOR")]
    since: Option<u64>,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    let stream = tail::filter(args.stdout, args.stderr);
    let mut sink = Sink::new(tail::mode(args.json, args.plain), false);
    let mut cursor = args.since.unwrap_or(0);
    // Output that arrives while we read is not chased: the spool as it was when we began.
    let mut end: Option<u64> = None;
    loop {
        let read = client
            .read(ReadRequest {
                id,
                since: Some(cursor),
                max_bytes: MAX_OUTPUT_PER_FRAME,
                stream,
            })
            .await?;
        sink.dropped(&read)?;
        sink.chunks(&read.chunks)?;
        let end = *end.get_or_insert(read.total);
        if read.next <= cursor || read.next >= end {
            sink.finish_line()?;
            return Ok(ExitCode::SUCCESS);
        }
        cursor = read.next;
    }
}
