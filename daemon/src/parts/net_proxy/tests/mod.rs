//! The proxy served on real loopback sockets, with real upstream listeners the tests run:
//! the fixtures, and what serving itself promises; `http` and `socks` test each protocol.
#![allow(clippy::unwrap_used)]

mod http;
mod socks;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::*;

/// Every await in a test is bounded.
async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("timed out")
}

/// An audit line: HOST:PORT, how it was asked for, the outcome, the address connected to.
type Audit = (String, Via, String, Option<SocketAddr>);

/// The daemon's gate, minus the person: [`Verdict::Ask`] is a no.
struct TestGate {
    rules: Rules,
    audits: Mutex<Vec<Audit>>,
}

impl Gate for TestGate {
    fn decide(&self, dest: &Dest) -> Pin<Box<dyn Future<Output = Decision> + Send>> {
        let d = match self
            .rules
            .decide(&dest.host, dest.port, dest.method.as_deref())
        {
            Verdict::Allow { exact } => Decision::Allow { exact },
            Verdict::Deny(why) => Decision::Deny(why),
            Verdict::Ask => Decision::Deny("not approved".to_string()),
        };
        Box::pin(async move { d })
    }

    fn audit(&self, dest: &Dest, outcome: &str, addr: Option<SocketAddr>) {
        let entry = (dest.to_string(), dest.via, outcome.to_string(), addr);
        self.audits.lock().unwrap().push(entry);
    }
}

struct Proxy {
    addr: SocketAddr,
    gate: Arc<TestGate>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    async fn start(allow: &[&str], deny: &[&str], read_only: &[&str]) -> Proxy {
        Proxy::with(allow, deny, read_only, LIMITS).await
    }

    async fn with(allow: &[&str], deny: &[&str], read_only: &[&str], limits: Limits) -> Proxy {
        let s = |l: &[&str]| l.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let rules = Rules::new(&s(allow), &s(deny), &s(read_only), Unknown::Deny).unwrap();
        let gate = Arc::new(TestGate {
            rules,
            audits: Mutex::default(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(serve_with(listener, gate.clone(), limits));
        Proxy { addr, gate, task }
    }

    async fn client(&self) -> TcpStream {
        within(TcpStream::connect(self.addr)).await.unwrap()
    }

    /// Sends `request` on a connection of its own and reads the answer until the proxy closes.
    async fn exchange_bytes(&self, request: &[u8]) -> Vec<u8> {
        let mut c = self.client().await;
        c.write_all(request).await.unwrap();
        let mut out = Vec::new();
        within(c.read_to_end(&mut out)).await.unwrap();
        out
    }

    async fn exchange(&self, request: &[u8]) -> String {
        String::from_utf8(self.exchange_bytes(request).await).unwrap()
    }

    /// The audit lines so far, taken.
    fn audits(&self) -> Vec<Audit> {
        std::mem::take(&mut *self.gate.audits.lock().unwrap())
    }
}

/// An upstream that echoes every connection back and closes when the other side does.
async fn echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    addr
}

/// A port nothing listens on.
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// An HTTP upstream for one request: reads its head and `Content-Length` body, answers
/// `response`, closes its sending side, and yields every byte it got until the proxy closed.
async fn http_upstream(response: &'static str) -> (SocketAddr, JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let got = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&got).to_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text
                    .split("\r\n")
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |v| v.parse::<usize>().unwrap());
                if got.len() >= end + 4 + length {
                    break;
                }
            }
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "the proxy closed mid-request");
            got.extend_from_slice(&buf[..n]);
        }
        s.write_all(response.as_bytes()).await.unwrap();
        s.shutdown().await.unwrap();
        s.read_to_end(&mut got).await.unwrap();
        String::from_utf8(got).unwrap()
    });
    (addr, got)
}

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// Opens a CONNECT tunnel to `to` and reads the 200, sending `early` with the head.
async fn tunnel(proxy: &Proxy, to: &str, early: &[u8]) -> TcpStream {
    let mut c = proxy.client().await;
    let mut req = format!("CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n\r\n").into_bytes();
    req.extend_from_slice(early);
    c.write_all(&req).await.unwrap();
    let mut got = vec![0u8; ESTABLISHED.len()];
    within(c.read_exact(&mut got)).await.unwrap();
    assert_eq!(got, ESTABLISHED, "{}", String::from_utf8_lossy(&got));
    c
}

async fn expect_echo(c: &mut TcpStream, data: &[u8]) {
    let mut got = vec![0u8; data.len()];
    within(c.read_exact(&mut got)).await.unwrap();
    assert_eq!(got, data);
}

#[test]
fn the_guard_knows_local_addresses() {
    let local = [
        "127.0.0.1",
        "127.9.9.9",
        "0.0.0.0",
        "169.254.169.254",
        "::1",
        "::",
        "fe80::1",
        "febf::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.1.1",
    ];
    for a in local {
        assert!(guarded(a.parse().unwrap()), "{a}");
    }
    for a in [
        "1.1.1.1",
        "10.0.0.1",
        "192.168.1.1",
        "2001:db8::1",
        "fec0::1",
        "::ffff:8.8.8.8",
    ] {
        assert!(!guarded(a.parse().unwrap()), "{a}");
    }
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_for_a_place() {
    let up = echo().await;
    let limits = Limits {
        connections: 2,
        ..LIMITS
    };
    let proxy = Proxy::with(&["127.0.0.1"], &[], &[], limits).await;
    let first = proxy.client().await;
    let _second = proxy.client().await;
    let mut third = proxy.client().await;
    third
        .write_all(format!("CONNECT {up} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = vec![0u8; ESTABLISHED.len()];
    let waited = tokio::time::timeout(Duration::from_millis(300), third.read_exact(&mut got)).await;
    assert!(waited.is_err(), "served beyond the limit");
    drop(first);
    within(third.read_exact(&mut got)).await.unwrap();
    assert_eq!(got, ESTABLISHED);
}

#[tokio::test]
async fn dropping_the_server_ends_its_connections() {
    let up = echo().await;
    let proxy = Proxy::start(&["127.0.0.1"], &[], &[]).await;
    let mut c = tunnel(&proxy, &up.to_string(), b"x").await;
    expect_echo(&mut c, b"x").await;
    drop(proxy);
    let mut rest = Vec::new();
    // Closed (or reset): either way, over.
    let _ = within(c.read_to_end(&mut rest)).await;
    assert!(rest.is_empty());
}

#[test]
fn env_vars_point_every_tool_at_the_listener() {
    let vars: std::collections::HashMap<String, String> = env_vars(4711).into_iter().collect();
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "PIP_PROXY",
    ] {
        assert_eq!(vars[k], "http://127.0.0.1:4711", "{k}");
    }
    assert_eq!(vars["ALL_PROXY"], "socks5h://127.0.0.1:4711");
    assert_eq!(vars["all_proxy"], "socks5h://127.0.0.1:4711");
    assert_eq!(vars["NO_PROXY"], "localhost,127.0.0.1,::1");
    assert_eq!(vars["no_proxy"], "localhost,127.0.0.1,::1");
    assert_eq!(vars.len(), 11);
}
