//! `bridge`: this machine's daemon socket on stdin/stdout, byte for byte, so that a client on
//! another machine reaches it through a command's stdio (`ssh HOST cubactl bridge`,
//! `docker exec -i CONTAINER cubactl bridge`). Nothing is added to the bytes: the client does
//! the same handshake as on a local socket.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cuba_protocol::client::{daemon_absent, start_daemon};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::ctx::Ctx;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Made for a client on another machine, as its bridge command: `ssh HOST cubactl bridge` carries \
the cuba-exec protocol between that client and this machine's cubad (started if none runs). \
Exits when either side closes. It refuses to run on a terminal: the protocol is binary.")]
pub struct Args {}

pub async fn run(ctx: &Ctx, _args: Args) -> Result<ExitCode> {
    if std::io::stdin().is_terminal() || std::io::stdout().is_terminal() {
        eprintln!(
            "cubactl bridge: stdin/stdout is a terminal; this command carries the binary \
             protocol for a remote client (`ssh HOST cubactl bridge`), not for typing"
        );
        return Ok(ExitCode::from(2));
    }
    let (from_daemon, mut to_daemon) = match connect(&ctx.socket).await {
        Err(e) if daemon_absent(&e) => {
            start_daemon(&ctx.socket).await?;
            connect(&ctx.socket).await
        }
        other => other,
    }
    .with_context(|| format!("cannot reach cubad at {}", ctx.socket.display()))?;
    let (stdin, mut stdout) = stdio();
    let mut stdin = BufReader::with_capacity(BUFFER, stdin);
    let mut from_daemon = BufReader::with_capacity(BUFFER, from_daemon);
    let upstream = async {
        tokio::io::copy_buf(&mut stdin, &mut to_daemon).await?;
        // The client is done: the daemon sees the end and closes its side.
        to_daemon.shutdown().await
    };
    let downstream = async {
        // `copy` flushes whenever the daemon has nothing more for now: no reply waits.
        tokio::io::copy_buf(&mut from_daemon, &mut stdout).await?;
        stdout.flush().await
    };
    tokio::pin!(upstream, downstream);
    let result = tokio::select! {
        // The daemon closed (it answered the end of input, or went away): nothing more can
        // come from it.
        r = &mut downstream => r,
        r = &mut upstream => match r {
            // The client's input ended: pass on what the daemon still sends, then go.
            Ok(()) if HALF_CLOSE => downstream.await,
            other => other,
        },
    };
    let code = match result {
        Ok(()) => 0,
        // A peer that went away mid-write is a close, not a failure of the bridge.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("cubactl bridge: {e}");
            1
        }
    };
    // Now, not through the runtime's shutdown: a read of stdin cannot be cancelled, and would
    // keep a bridge whose daemon closed waiting for its client's next byte.
    std::process::exit(code)
}

/// Bytes moved per read: a process's output comes in frames of up to 256 KiB.
const BUFFER: usize = 256 * 1024;

/// Whether the daemon can be told that the client's input ended while its replies still flow:
/// a socket half-closes. A Windows pipe cannot, so there the bridge ends with the client's
/// input, and replies the daemon had not yet sent are not passed on.
const HALF_CLOSE: bool = cfg!(unix);

/// The daemon's socket, split into its reading and writing halves.
#[cfg(unix)]
async fn connect(
    socket: &std::path::Path,
) -> std::io::Result<(impl AsyncRead + Unpin, impl AsyncWrite + Unpin)> {
    Ok(tokio::net::UnixStream::connect(socket).await?.into_split())
}

/// The daemon's pipe ([`cuba_protocol::win::open_pipe`]).
#[cfg(windows)]
async fn connect(
    socket: &std::path::Path,
) -> std::io::Result<(impl AsyncRead + Unpin, impl AsyncWrite + Unpin)> {
    Ok(tokio::io::split(
        cuba_protocol::win::open_pipe(socket).await?,
    ))
}

/// Stdin and stdout as the event loop reads and writes them. Pipes (what ssh, `docker exec -i`
/// and `kubectl exec -i` give) are used directly, non-blocking; tokio's own stdio hands every
/// write to a thread of its blocking pool, which caps throughput. Anything else (a file, a
/// socket) goes through tokio's stdio.
#[cfg(unix)]
fn stdio() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    use tokio::net::unix::pipe;
    let input: Box<dyn AsyncRead + Unpin + Send> = match fd_file(0).map(pipe::Receiver::from_file) {
        Some(Ok(r)) => Box::new(r),
        _ => Box::new(tokio::io::stdin()),
    };
    let output: Box<dyn AsyncWrite + Unpin + Send> = match fd_file(1).map(pipe::Sender::from_file) {
        Some(Ok(w)) => Box::new(w),
        _ => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

/// Windows: tokio's stdio, whatever stdin and stdout are.
#[cfg(windows)]
fn stdio() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

/// A new descriptor for `fd` (so the standard one stays as it is), as a `File`.
#[cfg(unix)]
fn fd_file(fd: i32) -> Option<std::fs::File> {
    use std::os::fd::{AsFd, BorrowedFd};
    // SAFETY: 0 and 1 are open for the whole life of the process (a closed one fails the dup).
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .map(std::fs::File::from)
}
