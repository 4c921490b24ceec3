//! `attach ID`: show a process's output live and send what is typed here to its stdin, so a
//! person can answer a prompt the agent must not see. Ctrl-] detaches; the process runs on.
//! A process on a terminal (`--tty`) takes this terminal over instead: its screen is painted,
//! then keys and output pass through raw.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cuba_protocol::client::Client;
use cuba_protocol::{FollowRequest, ProcessInfo, Request, StreamFilter};

use crate::ctx::Ctx;
use crate::describe;
use crate::exit;
use crate::forward::{self, DetachKey, Stopped};
use crate::passthrough::{OnSignal, Outcome, Remote};
use crate::print::{self, Mode, Sink};
use crate::signals::{self, Kind};
use crate::style::Paint;
use crate::target::Target;
use crate::term::{self, LineMode, RawMode};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
On a terminal: type a line and press Enter to send it (the line is edited locally, as in a \
shell). Ctrl-] detaches at once, and so does Ctrl-C; the process keeps running either way. \
Ctrl-D (or the end of piped input) detaches too, and with --eof closes the process's stdin \
first. Attaching ends by itself when the process ends.

A process started with --tty, attached from a terminal, gets this terminal: the screen is \
cleared and its screen painted, its terminal takes this one's size (and follows it when the \
window changes), and every key goes to it as typed, Ctrl-C, Ctrl-D and Ctrl-Z included. Only \
Ctrl-] is kept: it detaches, and the process keeps running. -n, --no-echo and --eof do not \
apply there.")]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// Lines of earlier output to show first (so the prompt is visible).
    #[arg(short = 'n', long, default_value_t = 10, value_name = "N")]
    lines: usize,
    /// Do not echo what is typed (for passwords).
    #[arg(long)]
    no_echo: bool,
    /// At the end of input (Ctrl-D, or the end of piped input), close the process's stdin
    /// (it reads EOF) instead of only detaching.
    #[arg(long)]
    eof: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let mut int = signals::listen(Kind::Interrupt)?;
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    let info = client.info(id).await?;
    let mut sink = Sink::new(Mode::Raw, false);
    if info.state.is_finished() {
        let (chunks, _) = print::last_lines(&client, id, args.lines, StreamFilter::Both).await?;
        sink.chunks(&chunks)?;
        sink.finish_line()?;
        eprintln!("cubactl: cannot attach: {}", describe::sentence(&info));
        return Ok(exit::failed());
    }
    if info.tty.is_some() && term::passthrough() {
        return on_terminal(ctx, &client, &info).await;
    }
    let tty = std::io::stdin().is_terminal();
    // Set up before anything is shown, so the prompt ends up last on the screen; restored
    // when this function returns, however it returns.
    let _mode = if tty {
        let mode = LineMode::enter(!args.no_echo).context("cannot set up the terminal")?;
        let note = format!(
            "[attached to process {id}; Enter sends a line, {}]",
            term::DETACH_HINT
        );
        eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &note));
        Some(mode)
    } else {
        None
    };
    let (chunks, read) = print::last_lines(&client, id, args.lines, StreamFilter::Both).await?;
    sink.chunks(&chunks)?;
    let mut frames = client
        .subscribe(Request::Follow(FollowRequest {
            id,
            since: Some(read.next),
            backlog: 0,
            stream: StreamFilter::Both,
        }))
        .await?;
    let mut input = forward::stdin(
        tokio::sync::watch::channel(client.clone()).1,
        id,
        if tty {
            DetachKey::DropLine
        } else {
            DetachKey::Ignore
        },
        args.eof,
    );
    let mut input_open = true;
    loop {
        tokio::select! {
            frame = frames.next() => {
                let Some(frame) = frame else {
                    anyhow::bail!("cubad ended the stream early; `cubactl info {id}` shows the process")
                };
                if let Some(end) = sink.follow_frame(frame?)? {
                    sink.finish_line()?;
                    let line = format!("[{}]", describe::sentence(&end));
                    eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &line));
                    return Ok(ExitCode::SUCCESS);
                }
            }
            _ = int.recv() => break,
            why = &mut input, if input_open => match why {
                // The process takes no more input; its output is still worth showing.
                Ok(Stopped::Closed) => input_open = false,
                _ => break,
            },
        }
    }
    sink.finish_line()?;
    let note = describe::detached(id);
    eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &note));
    Ok(ExitCode::SUCCESS)
}

/// Attached to a process's terminal from this one: raw mode, the screen painted, keys and
/// output passed through until the process ends or Ctrl-] detaches.
async fn on_terminal(ctx: &Ctx, client: &Client, info: &ProcessInfo) -> Result<ExitCode> {
    let id = info.id;
    let mut remote = Remote::new(client, id).context("cannot listen for signals")?;
    let raw = RawMode::enter().context("cannot set up the terminal")?;
    let result = async {
        let since = remote.paint(info.tty).await?;
        remote.pump(since, OnSignal::Detach).await
    }
    .await;
    remote.restore().await;
    drop(raw);
    let note = match result? {
        Outcome::Ended(end) => format!("[{}]", describe::sentence(&end)),
        Outcome::Detached => describe::detached(id),
    };
    eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &note));
    Ok(ExitCode::SUCCESS)
}
