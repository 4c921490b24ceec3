//! `tail ID`: the last lines of a process's output; `-f` follows it live until it ends.

use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::{FollowRequest, Request, StreamFilter};

use crate::ctx::Ctx;
use crate::describe;
use crate::print::{self, Mode, Sink};
use crate::style::Paint;
use crate::target::Target;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// How many lines to print.
    #[arg(short = 'n', long, default_value_t = 10, value_name = "N")]
    lines: usize,
    /// Keep printing new output as it comes, until the process ends (then say how it ended).
    #[arg(short = 'f', long)]
    follow: bool,
    /// Only what it wrote to stdout.
    #[arg(long, conflicts_with = "stderr")]
    stdout: bool,
    /// Only what it wrote to stderr.
    #[arg(long)]
    stderr: bool,
    /// Remove ANSI escape sequences (colours, cursor movement).
    #[arg(long)]
    plain: bool,
    /// Print JSON lines: {"stream": "stdout", "text": "…"}, and {"process": {…}} at the end.
    #[arg(long)]
    json: bool,
}

pub fn filter(stdout: bool, stderr: bool) -> StreamFilter {
    match (stdout, stderr) {
        (true, _) => StreamFilter::Stdout,
        (_, true) => StreamFilter::Stderr,
        _ => StreamFilter::Both,
    }
}

pub fn mode(json: bool, plain: bool) -> Mode {
    match (json, plain) {
        (true, _) => Mode::Json,
        (_, true) => Mode::Plain,
        _ => Mode::Raw,
    }
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    let stream = filter(args.stdout, args.stderr);
    let mut sink = Sink::new(mode(args.json, args.plain), false);
    let (chunks, read) = print::last_lines(&client, id, args.lines, stream).await?;
    sink.chunks(&chunks)?;
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    let mut frames = client
        .subscribe(Request::Follow(FollowRequest {
            id,
            since: Some(read.next),
            backlog: 0,
            stream,
        }))
        .await?;
    while let Some(frame) = frames.next().await {
        if let Some(info) = sink.follow_frame(frame?)? {
            sink.finish_line()?;
            if args.json {
                outln!("{}", serde_json::json!({ "process": info }))?;
            } else {
                let line = format!("[{}]", describe::sentence(&info));
                eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &line));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
