//! `run -- CMD`: start through the daemon and behave like the command ran here: its output
//! streams live, this terminal's input reaches it, Ctrl-C reaches its group, and cubactl exits
//! with its code. With `--tty` on a terminal, the command's terminal takes this one over
//! (raw keys, raw output) until it ends or Ctrl-] detaches.

use std::process::ExitCode;

use anyhow::{Context, Result};
use cuba_protocol::client::{Client, ClientError, Subscription};
use cuba_protocol::{FollowRequest, ProcState, Request, Response, Signal, StreamFilter};
use tokio::sync::watch;

use crate::ctx::Ctx;
use crate::describe;
use crate::exit;
use crate::forward::{self, DetachKey};
use crate::passthrough::{OnSignal, Outcome, Remote};
use crate::print::{Mode, Sink};
use crate::signals::{self, Kind};
use crate::spawn_args::SpawnArgs;
use crate::style::Paint;
use crate::term::{self, RawMode};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Ctrl-C sends SIGINT to the command's process group; a second Ctrl-C sends TERM (then KILL \
after the grace period), a third KILL, a fourth leaves without waiting for the end. Stdin is \
forwarded (Ctrl-D or the end of piped input closes the command's stdin). The process stays in \
the shared table, so others can follow it.

With --tty on a terminal, the command gets a terminal of this one's size and takes it over, as \
`attach` does: every key goes to it as typed (Ctrl-C included, through its terminal), its \
output is shown as is, and the size follows this window. Ctrl-] detaches and leaves it \
running. Without a terminal here, --tty output streams like any other.

--session NAME runs the command in the persistent shell NAME; Ctrl-C interrupts the command \
and keeps the session. Input goes to the session's shell, which the command reads; its end is \
not passed on (closing the shell's input would end the session).")]
pub struct Args {
    #[command(flatten)]
    spawn: SpawnArgs,
    /// Do not forward stdin: the command sees it closed at once.
    #[arg(long)]
    no_stdin: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    // Handlers first: a Ctrl-C from the first moment on is forwarded, not fatal to us.
    let mut int = signals::listen(Kind::Interrupt)?;
    let mut term_sig = signals::listen(Kind::Terminate)?;
    let mut hup = signals::listen(Kind::Hangup)?;
    let client = ctx.connect().await?;
    if args.spawn.tty && !args.no_stdin && term::passthrough() {
        return on_terminal(ctx, &client, &args).await;
    }
    let forward_stdin = !args.no_stdin
        && (term::stdin_is_foreground_terminal()
            || !std::io::IsTerminal::is_terminal(&std::io::stdin()));
    // A session's shell outlives the command: its input is never closed from here.
    let in_session = args.spawn.session.is_some();
    let req = args.spawn.request(!forward_stdin && !in_session);
    // Retried with its token if the connection drops before the answer: started once.
    let start = ctx.once(|c| {
        let req = req.clone();
        async move { c.spawn(req).await }
    });
    // A signal before the start is answered ends cubactl: a daemon or a link that never
    // answers must not make it deaf to Ctrl-C and `kill`.
    let (client, info) = tokio::select! {
        started = start => started?,
        _ = int.recv() => return Ok(not_started(130)),
        _ = term_sig.recv() => return Ok(not_started(143)),
        _ = hup.recv() => return Ok(not_started(129)),
    };
    if info.state == ProcState::FailedToStart {
        eprintln!("cubactl: {}", describe::sentence(&info));
        return Ok(exit::failed());
    }
    if let Some(note) = describe::notice(&info) {
        eprintln!("{}", ctx.err.paint(Some(Paint::Yellow), &note));
    }
    // Held for a person's approval: asked here (before this terminal's input goes to the
    // command), or told how to answer; a question later in the run is told as it comes.
    super::run_ask::at_start(ctx, &client, &info).await;
    let watcher = tokio::spawn(super::run_ask::watch_asks(ctx.err, client.clone(), info.id));
    let _watcher = AbortOnDrop(watcher);
    let id = info.id;
    let mut client = client;
    // The cursor of the last byte shown: a follow over a new connection goes on from it.
    let mut since = 0;
    let mut frames = follow(&client, id, since).await?;
    let (clients, current) = watch::channel(client.clone());
    let mut sink = Sink::new(Mode::Raw, true);
    if forward_stdin {
        // Ends by itself at EOF, or silently once the process takes no more input (it
        // ended, or closed its stdin); a process that ends first may leave it blocked in a
        // read, which is harmless: the process exits with us.
        drop(forward::stdin(current, id, DetachKey::Ignore, !in_session));
    }
    let mut interrupts = 0;
    loop {
        tokio::select! {
            frame = frames.next() => {
                let Some(frame) = frame else { break };
                let frame = match frame {
                    // An in-place upgrade or a restart: follow on over a new connection.
                    Err(e) if e.connection_lost() => {
                        client = ctx.reconnect(e).await.with_context(|| lost(id))?;
                        clients.send_replace(client.clone());
                        frames = follow(&client, id, since).await.with_context(|| lost(id))?;
                        continue;
                    }
                    frame => frame.with_context(|| lost(id))?,
                };
                if let Response::Output(read) = &frame {
                    since = read.next;
                }
                if let Some(end) = sink.follow_frame(frame)? {
                    sink.finish_line()?;
                    if says_more(&end) {
                        eprintln!("cubactl: {}", describe::sentence(&end));
                    }
                    if let Some(refused) = end.refused_forks() {
                        eprintln!("cubactl: {refused}");
                    }
                    for line in end.blocked_lines() {
                        eprintln!("cubactl: {line}");
                    }
                    return Ok(exit::of_process(end.exit_code, describe::signal_number(&end)));
                }
            }
            _ = int.recv() => {
                interrupts += 1;
                let sig = match interrupts {
                    1 => Signal::Int,
                    2 => Signal::Term,
                    3 => Signal::Kill,
                    // Even a KILL brought no end: the daemon is not answering. Never hang.
                    _ => {
                        sink.finish_line()?;
                        eprintln!(
                            "cubactl: no end of process {id} reported after SIGKILL; leaving \
                             (see `cubactl ps`, `cubactl daemon status`)"
                        );
                        return Ok(ExitCode::from(130));
                    }
                };
                forward::signal(&client, id, sig, "\n");
            }
            _ = term_sig.recv() => forward::signal(&client, id, Signal::Term, "\n"),
            _ = hup.recv() => forward::signal(&client, id, Signal::Hup, "\n"),
        }
    }
    anyhow::bail!(lost(id))
}

/// Ends the question watcher when `run` returns, however it returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `run --tty` with a terminal here: raw mode from before the start (no key typed early is
/// echoed here or lost), then keys and output pass through until the process ends.
async fn on_terminal(ctx: &Ctx, client: &Client, args: &Args) -> Result<ExitCode> {
    // Signals are ours before the terminal is raw: none may end cubactl with it left raw.
    let mut remote = Remote::new(client, 0).context("cannot listen for signals")?;
    let raw = RawMode::enter().context("cannot set up the terminal")?;
    let info = client.spawn(args.spawn.request(false)).await?;
    if info.state == ProcState::FailedToStart {
        drop(raw);
        eprintln!("cubactl: {}", describe::sentence(&info));
        return Ok(exit::failed());
    }
    if let Some(note) = describe::notice(&info) {
        // Raw mode: the carriage return is ours to write.
        eprint!("{}\r\n", ctx.err.paint(Some(Paint::Yellow), &note));
    }
    let id = info.id;
    remote.set_id(id);
    let result = remote.pump(0, OnSignal::Forward).await;
    remote.restore().await;
    drop(raw);
    match result.with_context(|| lost(id))? {
        Outcome::Ended(end) => {
            if says_more(&end) {
                eprintln!("cubactl: {}", describe::sentence(&end));
            }
            Ok(exit::of_process(
                end.exit_code,
                describe::signal_number(&end),
            ))
        }
        Outcome::Detached => {
            let note = describe::detached(id);
            eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &note));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Follows process `id`'s output from cursor `since`.
async fn follow(client: &Client, id: u64, since: u64) -> Result<Subscription, ClientError> {
    client
        .subscribe(Request::Follow(FollowRequest {
            id,
            since: Some(since),
            backlog: 0,
            stream: StreamFilter::Both,
        }))
        .await
}

/// Interrupted before the daemon said the command started: it may have (the request was
/// cancelled, but may have been carried out already).
fn not_started(code: u8) -> ExitCode {
    eprintln!(
        "cubactl: interrupted before the start was confirmed; the command may have started \
         (`cubactl ps` shows it)"
    );
    ExitCode::from(code)
}

fn lost(id: u64) -> String {
    format!(
        "lost the connection to cubad while following process {id}; it may still be \
         running (`cubactl ps`)"
    )
}

/// Whether the end is worth a line beyond the exit code: anything but a plain exit, or an exit
/// the daemon explains (a shell whose child the kernel killed for memory exits 137).
fn says_more(end: &cuba_protocol::ProcessInfo) -> bool {
    end.state != ProcState::Exited || end.error.is_some()
}
