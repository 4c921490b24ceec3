//! The stdin writer: one task per process feeding queued writes to its stdin pipe or terminal,
//! so a child that does not read its stdin never stalls the output drain or a request.

use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

use crate::record::StdinMsg;
use crate::terminal::Master;

/// Writes queued per process before a write gets `LIMIT` instead of waiting.
pub const QUEUE: usize = 64;

/// Where stdin writes go: the pipe, or the terminal (where the line discipline turns `C-c`
/// into SIGINT, and so on).
pub enum StdinSink {
    Pipe(pipe::Sender),
    Pty(Arc<Master>),
}

impl StdinSink {
    async fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            StdinSink::Pipe(p) => p.write_all(data).await,
            StdinSink::Pty(m) => m.write_all(data).await,
        }
    }
}

/// Feeds queued stdin writes to the child; ends at EOF, when the child closes its end, or when
/// the process finishes (the queue's sender is dropped).
pub async fn write_stdin(mut sink: StdinSink, mut rx: mpsc::Receiver<StdinMsg>) {
    while let Some(msg) = rx.recv().await {
        match msg {
            StdinMsg::Data(bytes) => {
                if let Err(e) = sink.write_all(&bytes).await {
                    tracing::debug!("stdin closed by the process: {e}");
                    break;
                }
            }
            StdinMsg::Eof => break,
        }
    }
    rx.close();
}
