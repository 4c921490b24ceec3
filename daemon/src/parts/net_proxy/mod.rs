//! The network proxy of a sandboxed tree. The tree runs in a network namespace with no route
//! out; the daemon hands it one TCP listener made inside that namespace and serves it here, so
//! the tree's tools reach the net only through this proxy (`HTTP_PROXY`/`HTTPS_PROXY`: CONNECT
//! and absolute-form HTTP; `ALL_PROXY=socks5h://`: SOCKS5), and the daemon resolves names.
//!
//! Both protocols share the port, told apart by the first byte (SOCKS5 starts with 5). Every
//! protocol ends in [`open`]: the [`Gate`] decides, the name is resolved, the loopback guard
//! looks at each address, the connect is made and the outcome audited — once per connection
//! that named a destination. Then the bytes are relayed until either side closes.

mod http;
pub mod rules;
mod socks;
#[cfg(test)]
mod tests;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::{timeout, timeout_at, Instant};

pub use rules::{Rules, Unknown, Verdict};

/// Connections served at once per listener. More wait, unaccepted, in the listener's backlog
/// (and the kernel refuses new ones once that is full): a waiting client costs the daemon
/// nothing, and its connection is served when a place frees.
pub const MAX_CONNECTIONS: usize = 256;

/// How the tree asked for a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Connect,
    Http,
    Socks5,
}

/// A destination the tree asked for: the host in normal form (lower case, an IPv6 address
/// without brackets), and the method where it can be seen (plain HTTP only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dest {
    pub host: String,
    pub port: u16,
    pub method: Option<String>,
    pub via: Via,
}

impl fmt::Display for Dest {
    /// `host:port`, an IPv6 host in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The gate's answer. `exact`: a rule names the host exactly, or the person approved this host;
/// only then may it reach a loopback or link-local address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow { exact: bool },
    Deny(String),
}

/// What the daemon plugs in: decides (rules, and an ask to the person for [`Verdict::Ask`] —
/// which can take minutes, so it is async), and writes the audit line of each connection.
pub trait Gate: Send + Sync + 'static {
    fn decide(&self, dest: &Dest) -> Pin<Box<dyn Future<Output = Decision> + Send>>;
    /// Once per connection attempt, after the decision and (when allowed) the connect:
    /// `outcome` is "allowed", "denied: REASON" or "failed: REASON" (resolve/connect error);
    /// `addr` the upstream address connected to.
    fn audit(&self, dest: &Dest, outcome: &str, addr: Option<SocketAddr>);
}

/// The bounds of serving; tests shorten them.
#[derive(Debug, Clone, Copy)]
struct Limits {
    connections: usize,
    /// From accept to the whole request head (HTTP) or handshake (SOCKS5).
    head: Duration,
    /// For resolving, and again for all connect attempts together.
    connect: Duration,
}

const LIMITS: Limits = Limits {
    connections: MAX_CONNECTIONS,
    head: Duration::from_secs(30),
    connect: Duration::from_secs(30),
};

/// Serves `listener` until this future is dropped or aborted: each accepted connection in its
/// own task, at most [`MAX_CONNECTIONS`] at once. The tasks belong to this future, so dropping
/// it ends every connection it serves.
pub async fn serve(listener: TcpListener, gate: Arc<dyn Gate>) {
    serve_with(listener, gate, LIMITS).await;
}

async fn serve_with(listener: TcpListener, gate: Arc<dyn Gate>, limits: Limits) {
    let mut tasks = JoinSet::new();
    let mut backoff = Duration::from_millis(50);
    loop {
        while tasks.len() >= limits.connections {
            if let Some(done) = tasks.join_next().await {
                reap(done);
            }
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff = Duration::from_millis(50);
                    tasks.spawn(connection(stream, gate.clone(), limits));
                }
                Err(e) => {
                    // Out of descriptors and the like: wait rather than spin on the error.
                    tracing::warn!("proxy: accept failed: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            },
            Some(done) = tasks.join_next() => reap(done),
        }
    }
}

fn reap(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        if e.is_panic() {
            tracing::error!("proxy: a connection task panicked: {e}");
        }
    }
}

/// One client connection: which protocol, by its first byte.
async fn connection(stream: TcpStream, gate: Arc<dyn Gate>, limits: Limits) {
    let deadline = Instant::now() + limits.head;
    let mut first = [0u8; 1];
    match timeout_at(deadline, stream.peek(&mut first)).await {
        Ok(Ok(1..)) => {}
        _ => return,
    }
    // Small writes (handshakes, interactive tunnels) should not wait for Nagle.
    let _ = stream.set_nodelay(true);
    if first[0] == socks::VERSION {
        socks::serve(stream, &*gate, deadline, limits.connect).await;
    } else {
        http::serve(stream, &*gate, deadline, limits.connect).await;
    }
}

/// Why a destination was not reached.
#[derive(Debug)]
enum Refusal {
    /// By the gate, or by the loopback guard.
    Denied(String),
    Unresolved(String),
    Unreachable(io::ErrorKind, String),
}

impl Refusal {
    /// The audit outcome.
    fn outcome(&self) -> String {
        match self {
            Refusal::Denied(why) => format!("denied: {why}"),
            Refusal::Unresolved(why) | Refusal::Unreachable(_, why) => format!("failed: {why}"),
        }
    }
}

/// Decides, resolves, guards, connects and audits: the one way every protocol reaches a
/// destination.
async fn open(gate: &dyn Gate, dest: &Dest, limit: Duration) -> Result<TcpStream, Refusal> {
    let reached = match gate.decide(dest).await {
        Decision::Deny(why) => Err(Refusal::Denied(why)),
        Decision::Allow { exact } => reach(dest, exact, limit).await,
    };
    match reached {
        Ok((stream, addr)) => {
            gate.audit(dest, "allowed", Some(addr));
            Ok(stream)
        }
        Err(refusal) => {
            gate.audit(dest, &refusal.outcome(), None);
            Err(refusal)
        }
    }
}

async fn reach(
    dest: &Dest,
    exact: bool,
    limit: Duration,
) -> Result<(TcpStream, SocketAddr), Refusal> {
    let resolved = timeout(
        limit,
        tokio::net::lookup_host((dest.host.as_str(), dest.port)),
    )
    .await;
    let addrs: Vec<SocketAddr> = match resolved {
        Ok(Ok(addrs)) => addrs.collect(),
        Ok(Err(e)) => {
            return Err(Refusal::Unresolved(format!(
                "cannot resolve {}: {e}",
                dest.host
            )))
        }
        Err(_) => {
            return Err(Refusal::Unresolved(format!(
                "resolving {} timed out",
                dest.host
            )))
        }
    };
    let Some(first) = addrs.first() else {
        return Err(Refusal::Unresolved(format!("{} has no address", dest.host)));
    };
    let first = first.ip();
    let open: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| exact || !guarded(a.ip()))
        .collect();
    if open.is_empty() {
        return Err(Refusal::Denied(format!(
            "{} is a local address ({first}): only a rule naming the host exactly reaches it",
            dest.host
        )));
    }
    let deadline = Instant::now() + limit;
    let mut last = (io::ErrorKind::Other, String::new());
    for addr in open {
        match timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok((stream, addr)),
            Ok(Err(e)) => last = (e.kind(), format!("cannot connect to {addr}: {e}")),
            Err(_) => {
                last = (
                    io::ErrorKind::TimedOut,
                    format!("connecting to {addr} timed out"),
                );
                break;
            }
        }
    }
    Err(Refusal::Unreachable(last.0, last.1))
}

/// Addresses of the daemon's own host rather than the net: loopback, "this host" (0.0.0.0/8,
/// `::`), link-local (169.254/16 — cloud metadata services —, fe80::/10), and the IPv4-mapped
/// forms of these. The daemon runs outside the tree's namespace, so these would be its own.
fn guarded(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback() || a.octets()[0] == 0 || a.is_link_local(),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => guarded(IpAddr::V4(v4)),
            None => a.is_loopback() || a.is_unspecified() || (a.segments()[0] & 0xffc0) == 0xfe80,
        },
    }
}

/// The proxy settings for a tree whose listener is on 127.0.0.1:`port` (inside its namespace).
/// `NO_PROXY` names the loopback addresses: loopback in the tree's namespace is its own.
/// Each way's buffer of a tunnel: tokio's default (8 KiB) makes a loopback download cost four
/// times the system calls; the bound per tree stays `MAX_CONNECTIONS` × 2 × this.
const RELAY_BUF: usize = 64 * 1024;

/// Copies both ways until either side closes.
pub(super) async fn relay(
    a: &mut tokio::net::TcpStream,
    b: &mut tokio::net::TcpStream,
) -> std::io::Result<(u64, u64)> {
    tokio::io::copy_bidirectional_with_sizes(a, b, RELAY_BUF, RELAY_BUF).await
}

/// Copies a response down to the client with a buffer of [`RELAY_BUF`].
pub(super) async fn copy_down<R, W>(from: &mut R, to: &mut W) -> std::io::Result<u64>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut from = tokio::io::BufReader::with_capacity(RELAY_BUF, from);
    tokio::io::copy_buf(&mut from, to).await
}

pub fn env_vars(port: u16) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let no_proxy = "localhost,127.0.0.1,::1".to_string();
    [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("http_proxy", &http),
        ("https_proxy", &http),
        ("ALL_PROXY", &socks),
        ("all_proxy", &socks),
        ("NO_PROXY", &no_proxy),
        ("no_proxy", &no_proxy),
        ("npm_config_proxy", &http),
        ("npm_config_https_proxy", &http),
        ("PIP_PROXY", &http),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.clone()))
    .collect()
}
