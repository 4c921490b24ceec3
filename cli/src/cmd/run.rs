//! `run -- CMD`: start through the daemon and behave like the command ran here: its output
//! streams live, this terminal's input reaches it, Ctrl-C reaches its group, and cubactl exits
//! with its code.

use std::process::ExitCode;

use anyhow::{Context, Result};
use cuba_protocol::client::Client;
use cuba_protocol::{FollowRequest, ProcState, Request, Signal, SignalRequest, StreamFilter};
use tokio::signal::unix::{signal, SignalKind};

use crate::ctx::Ctx;
use crate::describe;
use crate::exit;
use crate::forward;
use crate::output::{Mode, Sink};
use crate::spawn_args::SpawnArgs;
use crate::term;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Ctrl-C sends SIGINT to the command's process group; a second Ctrl-C sends TERM (then KILL \
after the grace period), a third KILL. Stdin is forwarded (Ctrl-D or the end of piped input \
closes the command's stdin). The process stays in the shared table, so others can follow it.")]
pub struct Args {
    #[command(flatten)]
    spawn: SpawnArgs,
    /// Do not forward stdin: the command sees it closed at once.
    #[arg(long)]
    no_stdin: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    // Handlers first: a Ctrl-C from the first moment on is forwarded, not fatal to us.
    let mut int = signal(SignalKind::interrupt())?;
    let mut term_sig = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let client = ctx.connect().await?;
    let forward_stdin = !args.no_stdin
        && (term::stdin_is_foreground_terminal()
            || !std::io::IsTerminal::is_terminal(&std::io::stdin()));
    let info = client.spawn(args.spawn.request(!forward_stdin)).await?;
    if info.state == ProcState::FailedToStart {
        eprintln!("cubactl: {}", describe::sentence(&info));
        return Ok(exit::failed());
    }
    let id = info.id;
    let mut frames = client
        .subscribe(Request::Follow(FollowRequest {
            id,
            since: Some(0),
            backlog: 0,
            stream: StreamFilter::Both,
        }))
        .await?;
    let mut sink = Sink::new(Mode::Raw, true);
    if forward_stdin {
        // Ends by itself at EOF; a process that ends first leaves it blocked in a read,
        // which is harmless: the process exits with us.
        drop(forward::stdin(client.clone(), id, false, true));
    }
    let mut interrupts = 0;
    loop {
        tokio::select! {
            frame = frames.next() => {
                let Some(frame) = frame else { break };
                let frame = frame.with_context(|| lost(id))?;
                if let Some(end) = sink.follow_frame(frame)? {
                    sink.finish_line()?;
                    if end.state != ProcState::Exited {
                        eprintln!("cubactl: {}", describe::sentence(&end));
                    }
                    return Ok(exit::of_process(end.exit_code, describe::signal_number(&end)));
                }
            }
            _ = int.recv() => {
                interrupts += 1;
                let sig = match interrupts {
                    1 => Signal::Int,
                    2 => Signal::Term,
                    _ => Signal::Kill,
                };
                send_signal(&client, id, sig);
            }
            _ = term_sig.recv() => send_signal(&client, id, Signal::Term),
            _ = hup.recv() => send_signal(&client, id, Signal::Hup),
        }
    }
    anyhow::bail!(lost(id))
}

/// Sends `signal` on a task of its own, so the output loop keeps draining (see `forward`).
fn send_signal(client: &Client, id: u64, signal: Signal) {
    let client = client.clone();
    let req = SignalRequest {
        id,
        signal,
        escalate: signal == Signal::Term,
        grace_ms: None,
        wait: false,
    };
    tokio::spawn(async move {
        if let Err(e) = client.signal(req).await {
            eprintln!("cubactl: could not send {signal} to process {id}: {e}");
        }
    });
}

fn lost(id: u64) -> String {
    format!(
        "lost the connection to cubad while following process {id}; it may still be \
         running (`cubactl ps`)"
    )
}
