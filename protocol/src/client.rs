//! An async client for `cubad`: handshake, multiplexed requests, streaming replies, and starting
//! the daemon when none is running. Shared by `cuba-exec`, `cubactl` and the tests.
//!
//! One reader task routes response frames to the request that awaits them (by id); one writer
//! task owns the socket's write half. A request whose future is dropped (a cancelled MCP call, a
//! Ctrl-C'd CLI) sends `Cancel` for itself, so the daemon stops working on it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;

use crate::handshake::{self, HandshakeError};
use crate::message::*;
use crate::paths;
use crate::wire::{self, WireError};

/// How long the handshake may take before the daemon is considered hung.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an auto-started daemon may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames a streaming reply may have waiting for its reader before the stream is ended.
const STREAM_BUFFER: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach cubad at {path}: {source}")]
    Connect { path: PathBuf, source: io::Error },
    #[error("cannot start cubad ({exe}): {reason}")]
    Start { exe: PathBuf, reason: String },
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error(transparent)]
    Remote(#[from] ProtocolError),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("connection to cubad lost: {0}")]
    Io(#[from] io::Error),
    #[error("connection to cubad closed")]
    Closed,
    #[error("cubad sent an unexpected reply: {0}")]
    Unexpected(String),
}

impl ClientError {
    /// The daemon's error kind, when the daemon answered with an error.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ClientError::Remote(e) => Some(e.kind),
            _ => None,
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, mpsc::Sender<Response>>>>;

/// A connection to the daemon. Cheap to clone; requests from clones share the connection.
#[derive(Clone)]
pub struct Client {
    out: mpsc::Sender<Bytes>,
    pending: Pending,
    /// False once the connection's reader has stopped (daemon gone).
    alive: Arc<std::sync::atomic::AtomicBool>,
    next_id: Arc<AtomicU64>,
    welcome: Arc<Welcome>,
}

/// This process as a client: its pid, cwd and environment.
pub fn this_client(kind: ClientKind, name: impl Into<String>) -> ClientInfo {
    ClientInfo {
        kind,
        name: name.into(),
        pid: std::process::id(),
        cwd: std::env::current_dir()
            .map(PathBuf::into_os_string)
            .unwrap_or_else(|_| OsString::from("/")),
        env: std::env::vars_os().collect(),
    }
}

impl Client {
    /// Connects to a running daemon and completes the handshake.
    pub async fn connect(socket: &Path, client: ClientInfo) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|source| ClientError::Connect {
                path: socket.to_path_buf(),
                source,
            })?;
        Self::handshake(stream, client).await
    }

    /// Connects, starting the daemon first if none answers on `socket`.
    pub async fn connect_or_start(
        socket: &Path,
        client: ClientInfo,
    ) -> Result<Client, ClientError> {
        match Self::connect(socket, client.clone()).await {
            Err(ClientError::Connect { source, .. }) if daemon_absent(&source) => {
                start_daemon(socket).await?;
                Self::connect(socket, client).await
            }
            other => other,
        }
    }

    async fn handshake(stream: UnixStream, client: ClientInfo) -> Result<Client, ClientError> {
        let mut framed = Framed::new(stream, wire::codec());
        let hello = handshake::encode_hello(&Hello { client })?;
        let exchange = async {
            framed.send(Bytes::from(hello)).await?;
            match framed.next().await {
                Some(frame) => Ok::<_, ClientError>(handshake::decode_welcome(&frame?)?),
                None => Err(ClientError::Closed),
            }
        };
        let welcome = tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                ClientError::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "cubad did not answer the handshake within 10 s",
                ))
            })??;

        let (mut sink, mut source) = framed.split();
        let (out, mut out_rx) = mpsc::channel::<Bytes>(64);
        tokio::spawn(async move {
            while let Some(frame) = out_rx.recv().await {
                if sink.send(frame).await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Arc::default();
        let routes = pending.clone();
        let alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let alive_flag = alive.clone();
        tokio::spawn(async move {
            while let Some(Ok(frame)) = source.next().await {
                let Ok(reply) = wire::decode::<ResponseFrame>(&frame) else {
                    break;
                };
                route(&routes, reply);
            }
            alive_flag.store(false, Ordering::SeqCst);
            // Dropping every sender wakes every waiter with "closed".
            lock(&routes).clear();
        });
        Ok(Client {
            out,
            pending,
            alive,
            next_id: Arc::new(AtomicU64::new(1)),
            welcome: Arc::new(welcome),
        })
    }

    /// Tells the daemon to stop working on request `id`. Best effort: if the queue is full or
    /// closed, the daemon drops the request's work when the connection closes anyway.
    fn cancel(&self, id: u64) {
        // The cancel gets an id of its own; its `Ok` finds no waiter and is dropped.
        let own = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(body) = wire::encode(&RequestFrame {
            id: own,
            request: Request::Cancel(id),
        }) {
            let _ = self.out.try_send(Bytes::from(body));
        }
    }

    /// False once the daemon has closed the connection: connect again.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst) && !self.out.is_closed()
    }

    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    async fn send(&self, request: Request, depth: usize) -> Result<Stream_, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = wire::encode(&RequestFrame { id, request })?;
        let (tx, rx) = mpsc::channel(depth);
        {
            // Checked under the routes' lock: the reader marks the connection dead before it
            // clears the routes, so a request is either refused here or woken by that clear —
            // never left waiting for a reply nobody will route.
            let mut pending = lock(&self.pending);
            if !self.alive.load(Ordering::SeqCst) {
                return Err(ClientError::Closed);
            }
            pending.insert(id, tx);
        }
        let guard = Stream_ {
            id,
            rx,
            client: self.clone(),
            done: false,
        };
        self.out
            .send(Bytes::from(body))
            .await
            .map_err(|_| ClientError::Closed)?;
        Ok(guard)
    }

    /// One request, one response. A `Response::Error` becomes `ClientError::Remote`.
    pub async fn call(&self, request: Request) -> Result<Response, ClientError> {
        let mut s = self.send(request, 1).await?;
        let reply = s.next().await.unwrap_or(Err(ClientError::Closed));
        s.done = true;
        reply
    }

    /// A streaming request: responses until `End` (which is not returned).
    pub async fn subscribe(&self, request: Request) -> Result<Subscription, ClientError> {
        let stream = self.send(request.clone(), STREAM_BUFFER).await?;
        Ok(Subscription { stream, request })
    }

    pub async fn spawn(&self, req: SpawnRequest) -> Result<ProcessInfo, ClientError> {
        match self.call(Request::Spawn(req)).await? {
            Response::Process(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Starts `req` unless a running process has its name and command: `(process, existing)`.
    pub async fn ensure(&self, req: SpawnRequest) -> Result<(ProcessInfo, bool), ClientError> {
        match self.call(Request::Ensure(req)).await? {
            Response::Process(p) => Ok((p, false)),
            Response::Existing(p) => Ok((p, true)),
            other => Err(unexpected(other)),
        }
    }

    pub async fn info(&self, id: u64) -> Result<ProcessInfo, ClientError> {
        match self.call(Request::Info(IdRequest { id })).await? {
            Response::Process(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    pub async fn read(&self, req: ReadRequest) -> Result<OutputRead, ClientError> {
        match self.call(Request::Read(req)).await? {
            Response::Output(o) => Ok(o),
            other => Err(unexpected(other)),
        }
    }

    pub async fn wait(&self, req: WaitRequest) -> Result<WaitResult, ClientError> {
        match self.call(Request::Wait(req)).await? {
            Response::Waited(w) => Ok(w),
            other => Err(unexpected(other)),
        }
    }

    pub async fn stdin(&self, id: u64, data: Vec<u8>, eof: bool) -> Result<(), ClientError> {
        match self
            .call(Request::Stdin(StdinRequest { id, data, eof }))
            .await?
        {
            Response::Ok => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    pub async fn signal(&self, req: SignalRequest) -> Result<ProcessInfo, ClientError> {
        match self.call(Request::Signal(req)).await? {
            Response::Process(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    pub async fn list(&self, req: ListRequest) -> Result<Vec<ProcessInfo>, ClientError> {
        match self.call(Request::List(req)).await? {
            Response::List(l) => Ok(l),
            other => Err(unexpected(other)),
        }
    }

    pub async fn status(&self) -> Result<DaemonStatus, ClientError> {
        match self.call(Request::DaemonStatus).await? {
            Response::DaemonStatus(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// Starts a process and waits for it in one round trip ([`Request::Run`]). Returns once it
    /// started; [`Running::result`] waits for the end of the wait. Dropping the [`Running`]
    /// cancels the wait (the process runs on).
    pub async fn run(&self, req: RunRequest) -> Result<Running, ClientError> {
        let mut stream = self.send(Request::Run(req), 2).await?;
        match stream.next().await {
            Some(Ok(Response::Process(info))) => Ok(Running { info, stream }),
            Some(Ok(other)) => Err(unexpected(other)),
            Some(Err(e)) => Err(e),
            None => Err(ClientError::Closed),
        }
    }

    /// Resizes a PTY process's terminal.
    pub async fn resize(&self, id: u64, size: TtySize) -> Result<(), ClientError> {
        match self
            .call(Request::Resize(ResizeRequest { id, size }))
            .await?
        {
            Response::Ok => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// The rendered screen of a PTY process.
    pub async fn screen(&self, id: u64) -> Result<ScreenView, ClientError> {
        match self.call(Request::Screen(IdRequest { id })).await? {
            Response::Screen(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }
}

fn unexpected(r: Response) -> ClientError {
    ClientError::Unexpected(format!("{r:?}").chars().take(200).collect())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the map inconsistent: recover it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hands a reply to the request waiting for it. Never waits: one stream whose reader fell a
/// whole buffer behind must not stall every other reply on the connection, so such a stream is
/// ended instead (its reader sees the connection as closed for that request).
fn route(routes: &Pending, reply: ResponseFrame) {
    let tx = lock(routes).get(&reply.id).cloned();
    match tx {
        Some(tx) => {
            let last = matches!(reply.response, Response::End | Response::Error(_));
            if tx.try_send(reply.response).is_err() || last {
                lock(routes).remove(&reply.id);
            }
        }
        None if reply.id == 0 && matches!(reply.response, Response::Error(_)) => {
            // A connection-level error (e.g. an undecodable frame): tell every waiter.
            let all: Vec<_> = lock(routes).drain().map(|(_, tx)| tx).collect();
            for tx in all {
                let _ = tx.try_send(reply.response.clone());
            }
        }
        None => {}
    }
}

/// The receiving side of one request. Dropping it before its last frame cancels the request.
/// A process started by [`Client::run`], its wait under way.
pub struct Running {
    /// The process as it started (its id, pid, or the reason it failed to start).
    pub info: ProcessInfo,
    stream: Stream_,
}

impl Running {
    /// The end of the wait: exit, match, quiet period, waiting for input, or timeout.
    pub async fn result(mut self) -> Result<WaitResult, ClientError> {
        let reply = self.stream.next().await;
        self.stream.done = true;
        match reply {
            Some(Ok(Response::Waited(w))) => Ok(w),
            Some(Ok(other)) => Err(unexpected(other)),
            Some(Err(e)) => Err(e),
            None => Err(ClientError::Closed),
        }
    }
}

struct Stream_ {
    id: u64,
    rx: mpsc::Receiver<Response>,
    client: Client,
    done: bool,
}

impl Stream_ {
    async fn next(&mut self) -> Option<Result<Response, ClientError>> {
        if self.done {
            return None;
        }
        match self.rx.recv().await {
            None => {
                self.done = true;
                Some(Err(ClientError::Closed))
            }
            Some(Response::End) => {
                self.done = true;
                None
            }
            Some(Response::Error(e)) => {
                self.done = true;
                Some(Err(ClientError::Remote(e)))
            }
            Some(r) => Some(Ok(r)),
        }
    }
}

impl Drop for Stream_ {
    fn drop(&mut self) {
        lock(&self.client.pending).remove(&self.id);
        if !self.done {
            self.client.cancel(self.id);
        }
    }
}

/// Frames of a streaming reply. Dropping it cancels the stream.
pub struct Subscription {
    stream: Stream_,
    /// The request, kept up to date (a `Follow`'s cursor) so the stream can be resumed.
    request: Request,
}

impl Subscription {
    /// The next frame; `None` once the stream has ended.
    ///
    /// A reader that falls a whole buffer behind has its stream ended by the reply router (so
    /// other replies keep flowing); it is resumed here from the last cursor received, so the
    /// reader sees every byte once, only later.
    pub async fn next(&mut self) -> Option<Result<Response, ClientError>> {
        loop {
            let frame = self.stream.next().await;
            match (&frame, &mut self.request) {
                (Some(Ok(Response::Output(out))), Request::Follow(follow)) => {
                    follow.since = Some(out.next);
                }
                (Some(Err(ClientError::Closed)), _) if self.stream.client.is_alive() => {
                    // The daemon still streams the old request: stop it.
                    self.stream.client.cancel(self.stream.id);
                    match self
                        .stream
                        .client
                        .send(self.request.clone(), STREAM_BUFFER)
                        .await
                    {
                        Ok(stream) => {
                            self.stream = stream;
                            continue;
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
                _ => {}
            }
            return frame;
        }
    }
}

fn daemon_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

/// Starts `cubad` detached (it forks into its own session) with its output in its log file,
/// then waits until the socket accepts connections. Two clients doing this at once get one
/// daemon: the loser of the daemon's start-up lock exits, and both connect to the winner.
pub async fn start_daemon(socket: &Path) -> Result<(), ClientError> {
    let exe = paths::daemon_binary();
    let fail = |reason: String| ClientError::Start {
        exe: exe.clone(),
        reason,
    };
    let state = paths::state_dir();
    // Owner-only: the state holds every process's output.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&state)
        .map_err(|e| fail(format!("cannot create state dir {}: {e}", state.display())))?;
    let log_path = paths::daemon_log(&state);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| fail(format!("cannot open {}: {e}", log_path.display())))?;
    let log2 = log.try_clone().map_err(|e| fail(e.to_string()))?;
    let mut child = std::process::Command::new(&exe)
        .arg("--daemonize")
        .arg("--socket")
        .arg(socket)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    // `--daemonize` forks and the parent exits at once: reap it so no zombie is left.
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .map_err(|e| fail(e.to_string()))?
        .map_err(|e| fail(e.to_string()))?;
    if !status.success() {
        return Err(fail(format!(
            "it exited with {status}; see {}",
            log_path.display()
        )));
    }
    let deadline = Instant::now() + START_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match UnixStream::connect(socket).await {
            Ok(_) => return Ok(()),
            Err(e) if daemon_absent(&e) && Instant::now() < deadline => {
                // Start-up is a few milliseconds; back off so a slow machine is not hammered.
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(fail(format!(
                    "it did not open {} ({e}); see {}",
                    socket.display(),
                    log_path.display()
                )))
            }
        }
    }
}
