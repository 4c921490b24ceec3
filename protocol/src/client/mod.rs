//! An async client for `cubad`: handshake, multiplexed requests, streaming replies, and starting
//! the daemon when none is running. Shared by `cuba-exec`, `cubactl` and the tests.
//!
//! One reader task routes response frames to the request that awaits them (by id); one writer
//! task owns the socket's write half. A request whose future is dropped (a cancelled MCP call, a
//! Ctrl-C'd CLI) sends `Cancel` for itself, so the daemon stops working on it.

mod access;
mod asks;
mod error;
mod events;
mod greet;
mod reader;
mod start;
mod started;
mod stream;
pub(crate) mod transport;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::codec::Framed;

use crate::message::*;
use crate::wire;
pub use error::ClientError;
pub use events::EventFeed;
pub use start::{daemon_absent, start_daemon};
use stream::{lock, unexpected, ReplyStream};
pub use stream::{Running, Subscription};

/// How long the handshake may take before the daemon is considered hung.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames a streaming reply may have waiting for its reader before the stream is ended.
const STREAM_BUFFER: usize = 256;
type Pending = Arc<Mutex<HashMap<u64, mpsc::Sender<Response>>>>;

/// What the reader task knows about the connection.
struct Health {
    /// False once the reader has stopped (the daemon closed the connection or went away).
    alive: AtomicBool,
    /// The daemon said it closes the connection ([`Response::Closing`]): every request still
    /// unanswered was never read, so it fails with [`ClientError::Gone`].
    unseen: AtomicBool,
    /// What the far end did when it stopped speaking the protocol, if it did.
    broken: Mutex<Option<String>>,
    /// Bytes of requests written since the handshake.
    written: AtomicU64,
    /// A bridge's stdin pipe, for the bytes it never read ([`Client::lost`]).
    unread: Option<reader::Pipe>,
}

impl Default for Health {
    fn default() -> Health {
        Health {
            alive: AtomicBool::new(true),
            unseen: AtomicBool::new(false),
            broken: Mutex::new(None),
            written: AtomicU64::new(0),
            unread: None,
        }
    }
}

/// Who is at the other end of a connection, for its errors.
pub(crate) struct Peer {
    /// `cubad`, or `the link to host NAME`.
    pub(crate) name: String,
    /// How long a reply begun may wait for its next byte ([`reader::read`]).
    pub(crate) stall: Option<Duration>,
    /// The pipe the requests are written to (a bridge's stdin): what is still in it when the
    /// bridge closes was never read by it.
    pub(crate) pipe: Option<reader::Pipe>,
}

/// A connection to the daemon. Cheap to clone; requests from clones share the connection.
#[derive(Clone)]
pub struct Client {
    out: mpsc::Sender<Bytes>,
    pending: Pending,
    health: Arc<Health>,
    next_id: Arc<AtomicU64>,
    welcome: Arc<Welcome>,
    /// `cubad`, or `the link to host NAME`: what a broken connection's error names.
    from: Arc<str>,
    /// What must live as long as the connection (a bridge process, killed when the last clone
    /// of the connection is dropped).
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
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
        env: std::env::vars_os()
            .filter(|(name, _)| !(cfg!(windows) && hidden_entry(name)))
            .collect(),
    }
}

/// An entry of a Windows environment block that is no variable: `cmd.exe`'s current directory
/// per drive (`=C:=C:\dir`) and the like, which every program `cmd` starts inherits. A name
/// with '=' can be in no other process's environment (the daemon refuses a client that sends
/// one), and what the client starts gets its own working directory anyway.
fn hidden_entry(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'=')
}

impl Client {
    /// Connects to a running daemon and completes the handshake.
    pub async fn connect(socket: &Path, client: ClientInfo) -> Result<Client, ClientError> {
        let hello = Hello {
            client,
            remote: false,
        };
        Self::connect_as(socket, hello).await
    }

    /// Connects with `hello`: a [`Hello::remote`] one is a caller that is not this machine's
    /// process (an HTTP session): it gets the daemon's environment, not its own.
    pub async fn connect_as(socket: &Path, hello: Hello) -> Result<Client, ClientError> {
        let stream = transport::connect(socket)
            .await
            .map_err(|source| ClientError::Connect {
                path: socket.to_path_buf(),
                source,
            })?;
        let peer = Peer {
            name: "cubad".into(),
            stall: None,
            pipe: None,
        };
        Self::over(stream, hello, None, HANDSHAKE_TIMEOUT, peer).await
    }

    /// Connects, starting the daemon first if none answers on `socket`.
    pub async fn connect_or_start(
        socket: &Path,
        client: ClientInfo,
    ) -> Result<Client, ClientError> {
        let hello = Hello {
            client,
            remote: false,
        };
        Self::connect_or_start_as(socket, hello).await
    }

    /// [`Client::connect_or_start`] with `hello` (see [`Client::connect_as`]).
    pub async fn connect_or_start_as(socket: &Path, hello: Hello) -> Result<Client, ClientError> {
        match Self::connect_as(socket, hello.clone()).await {
            Err(ClientError::Connect { source, .. }) if start::daemon_absent(&source) => {
                start_daemon(socket).await?;
                Self::connect_as(socket, hello).await
            }
            other => other,
        }
    }

    /// The handshake (within `limit`) and the connection's tasks over any byte stream (a
    /// socket, a bridge process's stdio). `keep` lives as long as the connection.
    pub(crate) async fn over<S>(
        stream: S,
        hello: Hello,
        keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
        limit: Duration,
        peer: Peer,
    ) -> Result<Client, ClientError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut framed = Framed::new(stream, wire::codec());
        let welcome = greet::exchange(&mut framed, &hello, limit).await?;
        let mut framed = framed.map_codec(reader::Watched::new);
        let buffered = framed.codec().buffered.clone();
        let first = reader::early(&mut framed, &peer.name)?;

        let (mut sink, source) = framed.split();
        let (out, mut out_rx) = mpsc::channel::<Bytes>(64);
        let health = Arc::new(Health {
            unread: peer.pipe,
            ..Health::default()
        });
        let counts = health.clone();
        tokio::spawn(async move {
            while let Some(frame) = out_rx.recv().await {
                // With its length prefix.
                let bytes = frame.len() as u64 + 4;
                if sink.send(frame).await.is_err() {
                    break;
                }
                counts.written.fetch_add(bytes, Ordering::SeqCst);
            }
        });
        let pending: Pending = Arc::default();
        tokio::spawn(reader::read(
            source,
            first,
            buffered,
            peer.stall,
            pending.clone(),
            health.clone(),
        ));
        Ok(Client {
            out,
            pending,
            health,
            next_id: Arc::new(AtomicU64::new(1)),
            welcome: Arc::new(welcome),
            from: peer.name.into(),
            _keep: keep,
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

    /// False once the daemon has closed the connection (also an idle one it closed with
    /// [`Response::Closing`]): connect again.
    pub fn is_alive(&self) -> bool {
        self.health.alive.load(Ordering::SeqCst) && !self.out.is_closed()
    }

    /// The daemon closed the connection saying it had read nothing unanswered.
    fn closed_unseen(&self) -> bool {
        self.health.unseen.load(Ordering::SeqCst)
    }

    /// The error of a request the dead connection failed: the far end's fault if it broke the
    /// protocol; not sent if a bridge closed without reading anything written to it; else
    /// `lost` (the connection closed or went away).
    fn lost(&self, sent: bool, lost: ClientError) -> ClientError {
        if let Some(why) = stream::lock(&self.health.broken).clone() {
            return ClientError::Broken {
                from: self.from.to_string(),
                why,
                sent,
            };
        }
        let written = self.health.written.load(Ordering::SeqCst);
        match &self.health.unread {
            Some(pipe) if written > 0 && reader::unread(pipe) == Some(written) => ClientError::Gone,
            _ => lost,
        }
    }

    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    async fn send(&self, request: Request, depth: usize) -> Result<ReplyStream, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = wire::encode(&RequestFrame { id, request })?;
        let (tx, rx) = mpsc::channel(depth);
        {
            // Checked under the routes' lock: the reader marks the connection dead before it
            // clears the routes, so a request is either refused here or woken by that clear —
            // never left waiting for a reply nobody will route.
            let mut pending = lock(&self.pending);
            if !self.health.alive.load(Ordering::SeqCst) {
                return Err(self.lost(false, ClientError::Gone));
            }
            pending.insert(id, tx);
        }
        let guard = ReplyStream {
            id,
            rx,
            client: self.clone(),
            done: false,
            answered: false,
        };
        // A closed queue means the writer stopped before taking the frame: never sent.
        self.out
            .send(Bytes::from(body))
            .await
            .map_err(|_| ClientError::Gone)?;
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

    /// Writes `data` to process `id`'s stdin (and closes it with `eof`), without a token.
    pub async fn stdin(&self, id: u64, data: Vec<u8>, eof: bool) -> Result<(), ClientError> {
        let token = None;
        self.write_stdin(StdinRequest {
            id,
            data,
            eof,
            token,
        })
        .await
    }

    /// A stdin write as given; with a token, the same request may be sent again after a lost
    /// connection and is written once.
    pub async fn write_stdin(&self, req: StdinRequest) -> Result<(), ClientError> {
        match self.call(Request::Stdin(req)).await? {
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

    /// The rows `req` asks for (see [`Client::listing`] for the count of those left out).
    pub async fn list(&self, req: ListRequest) -> Result<Vec<ProcessInfo>, ClientError> {
        Ok(self.listing(req).await?.processes)
    }

    pub async fn listing(&self, req: ListRequest) -> Result<Listing, ClientError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drive_s_current_directory_is_no_variable() {
        assert!(hidden_entry(std::ffi::OsStr::new("=C:")));
        assert!(hidden_entry(std::ffi::OsStr::new("=ExitCode")));
        assert!(!hidden_entry(std::ffi::OsStr::new("PATH")));
        assert!(!hidden_entry(std::ffi::OsStr::new("")));
        if cfg!(windows) {
            assert!(this_client(ClientKind::Cli, "t")
                .env
                .iter()
                .all(|(k, _)| !hidden_entry(k)));
        }
    }
}
