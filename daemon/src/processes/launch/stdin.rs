//! The stdin writer: one task per process feeding queued writes to its stdin pipe or terminal,
//! so a child that does not read its stdin never stalls the output drain or a request.

use std::collections::VecDeque;
#[cfg(unix)]
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

#[cfg(unix)]
use tokio::io::AsyncWriteExt;
#[cfg(unix)]
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

#[cfg(unix)]
use std::os::fd::RawFd;

use crate::parts::terminal::Master;
use crate::state::record::StdinMsg;
#[cfg(unix)]
use crate::state::record::StdinPaused;

/// Writes queued per process before a write gets `LIMIT` instead of waiting.
pub const QUEUE: usize = 64;

/// Where stdin writes go: the pipe, or the terminal (where the line discipline turns `C-c`
/// into SIGINT, and so on).
pub enum StdinSink {
    Pipe(PipeSink),
    Pty(Arc<Master>),
}

impl StdinSink {
    /// One cancel-safe write (dropped before it completes, it wrote nothing).
    async fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        match self {
            #[cfg(unix)]
            StdinSink::Pipe(p) => p.ready()?.write(data).await,
            #[cfg(windows)]
            StdinSink::Pipe(p) => p.0.write(data).await,
            StdinSink::Pty(m) => m.write(data).await,
        }
    }

    /// The pipe's descriptor; `None` on a terminal (the master is the supervisor's).
    #[cfg(unix)]
    fn pipe_fd(&self) -> Option<RawFd> {
        match self {
            StdinSink::Pipe(p) => Some(p.raw()),
            StdinSink::Pty(_) => None,
        }
    }
}

/// The stdin pipe's write end on Windows: a thread writes it (`threaded.rs`).
#[cfg(windows)]
pub struct PipeSink(crate::platform::windows::threaded::Writer);

#[cfg(windows)]
impl PipeSink {
    pub fn new(writer: crate::platform::windows::threaded::Writer) -> PipeSink {
        PipeSink(writer)
    }
}

/// The stdin pipe's write end, given to the runtime at the first write: most commands are
/// never sent input, and a registered end costs set-up at the spawn and an event when the
/// child exits.
#[cfg(unix)]
pub enum PipeSink {
    Idle(Option<OwnedFd>),
    Ready(pipe::Sender),
}

#[cfg(unix)]
impl PipeSink {
    pub fn new(fd: OwnedFd) -> PipeSink {
        PipeSink::Idle(Some(fd))
    }

    fn ready(&mut self) -> std::io::Result<&mut pipe::Sender> {
        if let PipeSink::Idle(fd) = self {
            let fd = fd
                .take()
                .ok_or_else(|| std::io::Error::other("stdin pipe lost"))?;
            // Either our own fresh end (no status flag) or one an earlier program of the
            // daemon handed over: checked and made non-blocking as an unknown descriptor.
            *self = PipeSink::Ready(pipe::Sender::from_owned_fd(fd)?);
        }
        match self {
            PipeSink::Ready(p) => Ok(p),
            PipeSink::Idle(_) => Err(std::io::Error::other("stdin pipe lost")),
        }
    }

    fn raw(&self) -> RawFd {
        match self {
            PipeSink::Idle(fd) => fd.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
            PipeSink::Ready(p) => p.as_raw_fd(),
        }
    }
}

/// Feeds queued stdin writes to the child; ends at EOF, when the child closes its end, or when
/// the process finishes (the queue's sender is dropped). Each write is one cancel-safe
/// `write(2)`, so a pause (an in-place upgrade) can come between any two, even while the child
/// does not read: what is not written yet is handed over.
///
/// `first_read`: for a new terminal, whose first write waits until its program reads it.
/// Typed ahead of that, the line discipline echoes the text, and the program's line editor
/// echoes it again once it reads: the screen would show every line twice, as no person's does.
pub async fn write_stdin(
    mut sink: StdinSink,
    mut rx: mpsc::Receiver<StdinMsg>,
    first_read: Option<Reads>,
) {
    let mut gate = first_read.map(|p| Box::pin(reads_its_terminal(p)));
    let mut pending: VecDeque<Vec<u8>> = VecDeque::new();
    let mut at = 0;
    let mut eof = false;
    // The queue's senders are gone: nothing more comes, what is queued is still written.
    let mut closed = false;
    loop {
        if (eof || closed) && pending.is_empty() {
            break;
        }
        tokio::select! {
            msg = rx.recv(), if !closed && pending.len() < QUEUE => match msg {
                None => closed = true,
                Some(StdinMsg::Data(bytes)) if !eof => pending.push_back(bytes),
                Some(StdinMsg::Data(_)) => {}
                Some(StdinMsg::Eof) => eof = true,
                #[cfg(unix)]
                Some(StdinMsg::Pause { reply, resume }) => {
                    let mut left: Vec<u8> = Vec::new();
                    for (i, chunk) in pending.iter().enumerate() {
                        left.extend_from_slice(if i == 0 { &chunk[at..] } else { chunk });
                    }
                    let state = StdinPaused { fd: sink.pipe_fd(), pending: left, eof };
                    if reply.send(state).is_ok() {
                        let _ = resume.await;
                    }
                }
            },
            _ = async { if let Some(g) = gate.as_mut() { g.await } }, if gate.is_some() => {
                gate = None;
            }
            r = write_front(&mut sink, &pending, at), if !pending.is_empty() && gate.is_none() => match r {
                Ok(n) => {
                    at += n;
                    if pending.front().is_some_and(|c| at >= c.len()) {
                        pending.pop_front();
                        at = 0;
                    }
                }
                Err(e) => {
                    tracing::debug!("stdin closed by the process: {e}");
                    break;
                }
            },
        }
    }
    rx.close();
}

/// How long a terminal's first write waits for its program to read: a program that never reads
/// it where the check can see (a game loop) still gets its input.
const FIRST_READ_LIMIT: Duration = Duration::from_secs(2);
/// How often, meanwhile, the tree is looked at. No event says "a process now sleeps reading
/// this terminal"; the look is a few `/proc` reads, for a new terminal's first write only.
const FIRST_READ_EVERY: Duration = Duration::from_millis(5);

/// Is a member of the tree reading its terminal (or gone)?
pub type Reads = Box<dyn Fn() -> bool + Send>;

/// Until `reads` says so, or [`FIRST_READ_LIMIT`] passed.
async fn reads_its_terminal(reads: Reads) {
    let until = tokio::time::Instant::now() + FIRST_READ_LIMIT;
    while !reads() && tokio::time::Instant::now() < until {
        tokio::time::sleep(FIRST_READ_EVERY).await;
    }
}

async fn write_front(
    sink: &mut StdinSink,
    pending: &VecDeque<Vec<u8>>,
    at: usize,
) -> std::io::Result<usize> {
    match pending.front() {
        Some(chunk) => sink.write(&chunk[at..]).await,
        None => std::future::pending().await,
    }
}
