//! A Unix-socket proxy that loses one request's answer: it forwards bytes between its own socket
//! and the daemon's, reading just enough of the framing (a 4-byte big-endian length, then the
//! body; the handshake is the first frame each way) to find the first request a predicate picks.
//! That frame reaches the daemon; when the daemon's first reply to it comes back (or the first
//! reply another predicate picks, e.g. a `Run`'s `Waited`), the proxy drops the reply and closes
//! both directions, as a connection lost mid-call does. Every later byte, on
//! that connection's successors, passes through.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::{wire, Request, RequestFrame, Response, ResponseFrame};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How long the proxy waits for the daemon's reply to the request it cuts.
const REPLY_WAIT: Duration = Duration::from_secs(20);

type Pick = dyn Fn(&Request) -> bool + Send + Sync;
type PickReply = dyn Fn(&Response) -> bool + Send + Sync;

struct Shared {
    /// Still to cut: true until the picked request was seen.
    armed: AtomicBool,
    /// Connections cut so far.
    cuts: AtomicUsize,
    pick: Box<Pick>,
    /// Which reply to the picked request is lost with the connection.
    reply: Box<PickReply>,
}

/// The proxy; dropping it stops accepting (open connections end with their peers).
pub struct CutProxy {
    path: PathBuf,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl CutProxy {
    /// Listens on `path` and forwards to the daemon on `daemon`, cutting the connection that
    /// carries the first request `pick` accepts, once.
    pub fn start(
        path: &Path,
        daemon: &Path,
        pick: impl Fn(&Request) -> bool + Send + Sync + 'static,
    ) -> CutProxy {
        Self::start_at_reply(path, daemon, pick, |_| true)
    }

    /// [`CutProxy::start`], cutting at the first reply to that request that `reply` accepts
    /// (earlier ones pass).
    pub fn start_at_reply(
        path: &Path,
        daemon: &Path,
        pick: impl Fn(&Request) -> bool + Send + Sync + 'static,
        reply: impl Fn(&Response) -> bool + Send + Sync + 'static,
    ) -> CutProxy {
        let listener = UnixListener::bind(path)
            .unwrap_or_else(|e| panic!("cannot bind {}: {e}", path.display()));
        let shared = Arc::new(Shared {
            armed: AtomicBool::new(true),
            cuts: AtomicUsize::new(0),
            pick: Box::new(pick),
            reply: Box::new(reply),
        });
        let daemon = daemon.to_path_buf();
        let state = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(upstream) = UnixStream::connect(&daemon).await else {
                    continue;
                };
                tokio::spawn(forward(client, upstream, state.clone()));
            }
        });
        CutProxy {
            path: path.to_path_buf(),
            shared,
            task,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many connections were cut (0 or 1).
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn read_frame(r: &mut (impl AsyncRead + Unpin)) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await.ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    r.read_exact(&mut body).await.ok()?;
    Some(body)
}

async fn write_frame(w: &mut (impl AsyncWrite + Unpin), body: &[u8]) -> bool {
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes();
    w.write_all(&len).await.is_ok() && w.write_all(body).await.is_ok()
}

/// Both directions of one connection, frame by frame, until either side closes or the cut.
async fn forward(client: UnixStream, upstream: UnixStream, shared: Arc<Shared>) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_daemon, mut to_daemon) = upstream.into_split();
    // The id of the request being cut (0: none), and the signal that its reply came.
    let cutting = Arc::new(AtomicU64::new(0));
    let cut = Arc::new(Notify::new());
    let (watch, done, state) = (cutting.clone(), cut.clone(), shared.clone());
    let replies = tokio::spawn(async move {
        while let Some(body) = read_frame(&mut from_daemon).await {
            let id = watch.load(Ordering::SeqCst);
            let answers = id != 0
                && wire::decode::<ResponseFrame>(&body)
                    .is_ok_and(|f| f.id == id && (state.reply)(&f.response));
            if answers {
                // The daemon has carried the request out; its reply is lost with the connection.
                done.notify_one();
                return;
            }
            if !write_frame(&mut to_client, &body).await {
                return;
            }
        }
    });
    let mut handshake = true;
    while let Some(body) = read_frame(&mut from_client).await {
        let picked = !handshake
            && wire::decode::<RequestFrame>(&body)
                .is_ok_and(|f| (shared.pick)(&f.request) && mark(&shared, &cutting, f.id));
        handshake = false;
        if !write_frame(&mut to_daemon, &body).await {
            break;
        }
        if picked {
            let _ = tokio::time::timeout(REPLY_WAIT, cut.notified()).await;
            shared.cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
    }
    // Dropping every half closes both sockets.
    replies.abort();
}

/// Takes the one cut (if still armed) for request `id`.
fn mark(shared: &Shared, cutting: &AtomicU64, id: u64) -> bool {
    if shared.armed.swap(false, Ordering::SeqCst) {
        cutting.store(id, Ordering::SeqCst);
        return true;
    }
    false
}
