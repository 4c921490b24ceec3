//! `tail ID`: the last lines of a process's output; `-f` follows it live until it ends.

use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::{FollowRequest, Request, Response, StreamFilter};

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
    let stream = filter(args.stdout, args.stderr);
    let mut sink = Sink::new(mode(args.json, args.plain), false);
    // Reads only: a connection lost on the way (an upgrade in place) is simply made again.
    let mut attempt = 0;
    let (client, id, chunks, read) = loop {
        let first = async {
            let client = ctx.connect().await?;
            let id = args.process.resolve(&client).await?;
            let (chunks, read) = print::last_lines(&client, id, args.lines, stream).await?;
            anyhow::Ok((client, id, chunks, read))
        };
        match first.await {
            Ok(done) => break done,
            Err(e) if attempt < 8 && connection_lost(&e) => {
                attempt += 1;
                ctx.forget().await;
                tokio::time::sleep(std::time::Duration::from_millis(10 << attempt)).await;
            }
            Err(e) => return Err(e),
        }
    };
    sink.chunks(&chunks)?;
    if chunks.is_empty() && !args.json && !args.follow {
        // Nothing printed: say so, rather than leave an empty screen to puzzle over.
        let line = match client.info(id).await {
            Ok(info) if info.state.is_finished() => {
                format!("[no output; {}]", describe::sentence(&info))
            }
            _ => format!("[no output from process {id} yet]"),
        };
        eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &line));
    }
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    follow(ctx, client, (id, read.next, stream), &mut sink, args.json).await
}

/// Follows `id` from cursor `since` until it ends. A lost connection is followed on a new one
/// from the cursor of the last byte printed, so nothing is shown twice or skipped.
async fn follow(
    ctx: &Ctx,
    mut client: cuba_protocol::client::Client,
    (id, mut since, stream): (u64, u64, StreamFilter),
    sink: &mut Sink,
    json: bool,
) -> Result<ExitCode> {
    // How it ended, for cubactl's own exit code (as `run` gives it).
    let mut ended: Option<cuba_protocol::ProcessInfo> = None;
    loop {
        let request = Request::Follow(FollowRequest {
            id,
            since: Some(since),
            backlog: 0,
            stream,
        });
        let lost = match client.subscribe(request).await {
            Ok(mut frames) => loop {
                match frames.next().await {
                    None => {
                        return Ok(match &ended {
                            Some(info) => crate::exit::of_process(
                                info.exit_code,
                                describe::signal_number(info),
                            ),
                            None => ExitCode::SUCCESS,
                        })
                    }
                    Some(Ok(Response::Output(read))) => {
                        since = read.next;
                        sink.follow_frame(Response::Output(read))?;
                    }
                    Some(Ok(frame)) => {
                        if let Some(info) = sink.follow_frame(frame)? {
                            sink.finish_line()?;
                            if json {
                                outln!(
                                    "{}",
                                    serde_json::json!({ "process": crate::json::ProcessJson::of(&info) })
                                )?;
                            } else {
                                let line = format!("[{}]", describe::sentence(&info));
                                eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &line));
                            }
                            ended = Some(info);
                        }
                    }
                    Some(Err(e)) if e.connection_lost() => break e,
                    Some(Err(e)) => return Err(e.into()),
                }
            },
            Err(e) if e.connection_lost() => e,
            Err(e) => return Err(e.into()),
        };
        client = ctx.reconnect(lost).await?;
    }
}

fn connection_lost(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<cuba_protocol::client::ClientError>()
            .is_some_and(cuba_protocol::client::ClientError::connection_lost)
    })
}
