//! Forwarding this terminal's stdin to a process, on a task of its own.
//!
//! Why a task: the client routes every reply of a connection through one reader, and a
//! streaming reply (`Follow`) that is not drained holds up the rest. The loop that prints the
//! output must therefore never wait for another request's reply; writes to stdin (and signals)
//! run beside it.

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{ErrorKind, RequestToken, Signal, SignalRequest, StdinRequest};
use tokio::sync::{oneshot, watch};

use crate::term::{self, DETACH_KEY};

/// Why forwarding stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The detach key (Ctrl-]) was typed.
    DetachKey,
    /// Stdin ended (Ctrl-D on a terminal, or the end of piped input).
    Eof,
    /// The process ended or closed its stdin: nothing more can reach it.
    Closed,
}

/// What Ctrl-] in the input does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DetachKey {
    /// Nothing special: it is forwarded like any byte (piped input).
    Ignore,
    /// Stop; the line it ended is not sent (line mode: an unfinished answer is dropped).
    DropLine,
    /// Stop after sending the bytes typed before it (raw mode: keys go through one by one,
    /// and what was typed before the detach key was meant for the process).
    SendBefore,
}

/// Starts forwarding stdin to process `id`, stopping at the detach key as `detach` says.
/// `close_on_eof`: close the process's stdin when ours ends. Failed writes are reported once;
/// a process that no longer takes input is not a failure: forwarding stops without a word
/// (with a detach key, stdin is still read for it). `clients` is the connection to write on;
/// a write whose connection was lost is sent again, with its token (written once), on the
/// next connection put there.
pub fn stdin(
    mut clients: watch::Receiver<Client>,
    id: u64,
    detach: DetachKey,
    close_on_eof: bool,
) -> oneshot::Receiver<Stopped> {
    let (done, stopped) = oneshot::channel();
    let mut input = term::stdin_chunks();
    let raw = detach == DetachKey::SendBefore;
    tokio::spawn(async move {
        let mut warned = false;
        // False once the process takes no more input.
        let mut open = true;
        let why = loop {
            match input.recv().await.flatten() {
                Some(mut data) => {
                    let at = data.iter().position(|b| *b == DETACH_KEY);
                    let stop = match (at, detach) {
                        (None, _) | (_, DetachKey::Ignore) => false,
                        (Some(_), DetachKey::DropLine) => break Stopped::DetachKey,
                        (Some(at), DetachKey::SendBefore) => {
                            data.truncate(at);
                            true
                        }
                    };
                    if open && !data.is_empty() {
                        match write(&mut clients, id, data, false).await {
                            Ok(()) => {}
                            // `yes | cubactl run -- true`: the end of the process, not an error.
                            Err(e) if takes_no_input(&e) => {
                                if detach == DetachKey::Ignore {
                                    break Stopped::Closed;
                                }
                                open = false;
                            }
                            Err(e) => {
                                if !std::mem::replace(&mut warned, true) {
                                    // Raw mode (SendBefore) needs the carriage return spelled
                                    // out.
                                    let end = if raw { "\r\n" } else { "\n" };
                                    eprint!("cubactl: input not delivered: {e}{end}");
                                }
                            }
                        }
                    }
                    if stop {
                        break Stopped::DetachKey;
                    }
                }
                None => {
                    if close_on_eof && open {
                        // A process that already closed its stdin or ended needs no EOF.
                        let _ = write(&mut clients, id, Vec::new(), true).await;
                    }
                    break Stopped::Eof;
                }
            }
        };
        let _ = done.send(why);
    });
    stopped
}

/// Writes to process `id`'s stdin on the current connection; when that is lost, again (the
/// same token) on the next one `clients` gets, until the write is answered or no new
/// connection comes.
async fn write(
    clients: &mut watch::Receiver<Client>,
    id: u64,
    data: Vec<u8>,
    eof: bool,
) -> Result<(), ClientError> {
    let req = StdinRequest {
        id,
        data,
        eof,
        token: Some(RequestToken::fresh()),
    };
    loop {
        let client = clients.borrow_and_update().clone();
        match client.write_stdin(req.clone()).await {
            Err(e) if e.connection_lost() => {
                let next = tokio::time::timeout(crate::ctx::RECONNECT_WITHIN, clients.changed());
                if !matches!(next.await, Ok(Ok(()))) {
                    return Err(e);
                }
            }
            done => return done,
        }
    }
}

/// The daemon's answer when the process has ended, closed its stdin, or is gone (pruned).
fn takes_no_input(e: &ClientError) -> bool {
    matches!(
        e.kind(),
        Some(ErrorKind::InvalidState | ErrorKind::NotFound)
    )
}

/// Sends `signal` to process `id` on a task of its own, so the output loop keeps draining.
/// TERM escalates to KILL after the grace period. A failure is reported, its line ended with
/// `end` (`"\r\n"` in raw mode).
pub fn signal(client: &Client, id: u64, signal: Signal, end: &'static str) {
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
            eprint!("cubactl: could not send {signal} to process {id}: {e}{end}");
        }
    });
}
