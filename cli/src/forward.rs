//! Forwarding this terminal's stdin to a process, on a task of its own.
//!
//! Why a task: the client routes every reply of a connection through one reader, and a
//! streaming reply (`Follow`) that is not drained holds up the rest. The loop that prints the
//! output must therefore never wait for another request's reply; writes to stdin (and signals)
//! run beside it.

use cuba_protocol::client::Client;
use tokio::sync::oneshot;

use crate::term::{self, DETACH_KEY};

/// Why forwarding stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The detach key (Ctrl-]) was typed.
    DetachKey,
    /// Stdin ended (Ctrl-D on a terminal, or the end of piped input).
    Eof,
}

/// Starts forwarding stdin to process `id`. `detach_key`: stop at Ctrl-] (on a terminal).
/// `close_on_eof`: close the process's stdin when ours ends. Failed writes are reported once.
pub fn stdin(
    client: Client,
    id: u64,
    detach_key: bool,
    close_on_eof: bool,
) -> oneshot::Receiver<Stopped> {
    let (done, stopped) = oneshot::channel();
    let mut input = term::stdin_chunks();
    tokio::spawn(async move {
        let mut warned = false;
        let why = loop {
            match input.recv().await.flatten() {
                Some(data) if detach_key && data.contains(&DETACH_KEY) => break Stopped::DetachKey,
                Some(data) => {
                    if let Err(e) = client.stdin(id, data, false).await {
                        if !std::mem::replace(&mut warned, true) {
                            eprintln!("cubactl: input not delivered: {e}");
                        }
                    }
                }
                None => {
                    if close_on_eof {
                        // A process that already closed its stdin or ended needs no EOF.
                        let _ = client.stdin(id, Vec::new(), true).await;
                    }
                    break Stopped::Eof;
                }
            }
        };
        let _ = done.send(why);
    });
    stopped
}
