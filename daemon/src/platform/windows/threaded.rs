//! Blocking handles as the runtime's events: an anonymous pipe (and a pseudo console's pipes)
//! cannot be waited on asynchronously on Windows, so each is read or written by a thread of its
//! own that hands chunks through a bounded channel, as tokio's own `process` does there. The
//! supervisor then awaits a chunk exactly as it awaits a Unix pipe's readiness.

use std::io::{self, Read, Write};
use std::sync::Mutex;

use tokio::sync::{mpsc, oneshot};

/// Chunks in flight per reader: a command that writes faster than the daemon takes waits in
/// its `WriteFile`, as it would on a full pipe.
const CHUNKS: usize = 4;
const READ_BUF: usize = 64 * 1024;
/// Stack of each thread: they hold one buffer, on the heap.
const THREAD_STACK: usize = 64 * 1024;

pub fn thread(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_string())
        .stack_size(THREAD_STACK)
        .spawn(f)
        .map(drop)
}

/// The read side: chunks from the thread, and what is left of the last one.
pub struct Reader {
    inner: Mutex<Inner>,
}

struct Inner {
    rx: mpsc::Receiver<io::Result<Vec<u8>>>,
    left: Vec<u8>,
    at: usize,
}

impl Reader {
    /// Reads `source` to its end on a thread named `name`.
    pub fn spawn(name: &str, mut source: impl Read + Send + 'static) -> io::Result<Reader> {
        let (tx, rx) = mpsc::channel(CHUNKS);
        thread(name, move || {
            let mut buf = vec![0u8; READ_BUF];
            loop {
                let chunk = match source.read(&mut buf) {
                    // A broken pipe is the end of a pipe on Windows.
                    Ok(0) => break,
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => break,
                    Ok(n) => Ok(buf[..n].to_vec()),
                    Err(e) => Err(e),
                };
                let failed = chunk.is_err();
                if tx.blocking_send(chunk).is_err() || failed {
                    break;
                }
            }
        })?;
        Ok(Reader {
            inner: Mutex::new(Inner {
                rx,
                left: Vec::new(),
                at: 0,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next bytes; 0 at the end.
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        if inner.at < inner.left.len() {
            return Ok(inner.take(buf));
        }
        match inner.rx.recv().await {
            None => Ok(0),
            Some(chunk) => {
                inner.left = chunk?;
                inner.at = 0;
                Ok(inner.take(buf))
            }
        }
    }

    /// What has arrived already, without waiting: `WouldBlock` when nothing has.
    pub fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut inner = self.lock();
        if inner.at < inner.left.len() {
            return Ok(inner.take(buf));
        }
        match inner.rx.try_recv() {
            Ok(chunk) => {
                inner.left = chunk?;
                inner.at = 0;
                Ok(inner.take(buf))
            }
            Err(mpsc::error::TryRecvError::Empty) => Err(io::ErrorKind::WouldBlock.into()),
            Err(mpsc::error::TryRecvError::Disconnected) => Ok(0),
        }
    }
}

impl Inner {
    fn take(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.left.len() - self.at);
        buf[..n].copy_from_slice(&self.left[self.at..self.at + n]);
        self.at += n;
        n
    }
}

/// The write side: each write goes to the thread, and its result comes back. Dropped, the
/// thread ends and the handle closes (the command reads end of file).
pub struct Writer {
    tx: mpsc::Sender<(Vec<u8>, oneshot::Sender<io::Result<usize>>)>,
    /// A write handed to the thread whose result was not taken yet (its caller was
    /// cancelled): the next call, which carries the same bytes again, takes it instead of
    /// writing them twice.
    in_flight: Option<oneshot::Receiver<io::Result<usize>>>,
}

impl Writer {
    pub fn spawn(name: &str, mut sink: impl Write + Send + 'static) -> io::Result<Writer> {
        let (tx, mut rx) = mpsc::channel::<(Vec<u8>, oneshot::Sender<io::Result<usize>>)>(1);
        thread(name, move || {
            while let Some((data, done)) = rx.blocking_recv() {
                let r = sink.write(&data);
                let failed = r.is_err();
                let _ = done.send(r);
                if failed {
                    break;
                }
            }
        })?;
        Ok(Writer {
            tx,
            in_flight: None,
        })
    }

    /// Writes some of `data`: how much. Cancel-safe for a caller that, cancelled, calls again
    /// with the same bytes (the stdin writer does).
    pub async fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let gone = || io::Error::from(io::ErrorKind::BrokenPipe);
        if self.in_flight.is_none() {
            let (done, result) = oneshot::channel();
            let permit = self.tx.reserve().await.map_err(|_| gone())?;
            permit.send((data.to_vec(), done));
            self.in_flight = Some(result);
        }
        let result = match self.in_flight.as_mut() {
            Some(r) => r.await,
            None => return Err(gone()),
        };
        self.in_flight = None;
        result.map_err(|_| gone())?
    }
}
