//! A daemon that dies after a request reached it, made deterministic: a stand-in `cubad` on a
//! temp socket completes the handshake, notes each request, and drops the connection when it
//! gets one of the requests listed to drop. The shim sends a command or input again only with
//! the same request token (the daemon carries it out once), never a signal a second time (it may
//! have been delivered); when it gives up it says the action may have been done; reads are
//! retried.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::mcp::{in_process, Mcp};
use common::TestDir;
use cuba_protocol::handshake::{decode_hello, encode_welcome, HelloOutcome};
use cuba_protocol::{wire, Request, RequestFrame, RequestToken, Response, ResponseFrame, Welcome};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// What the stand-in daemon was asked, by request name, over all connections, with the
/// request tokens each came with.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Asked>>);

/// Request name → the token of each time it came.
type Asked = HashMap<&'static str, Vec<Option<RequestToken>>>;

impl Seen {
    fn note(&self, name: &'static str, token: Option<RequestToken>) -> usize {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = seen.entry(name).or_default();
        n.push(token);
        n.len()
    }

    fn count(&self, name: &str) -> usize {
        let seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(name).map_or(0, Vec::len)
    }

    /// The distinct tokens `name` requests came with.
    fn tokens(&self, name: &str) -> HashSet<Option<RequestToken>> {
        let seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(name).into_iter().flatten().copied().collect()
    }
}

fn token(r: &Request) -> Option<RequestToken> {
    match r {
        Request::Spawn(s) | Request::Ensure(s) => s.token,
        Request::Run(r) => r.spawn.token,
        Request::Stdin(s) => s.token,
        _ => None,
    }
}

fn name(r: &Request) -> &'static str {
    match r {
        Request::Spawn(_) => "spawn",
        Request::Run(_) => "run",
        Request::Ensure(_) => "ensure",
        Request::Stdin(_) => "stdin",
        Request::Signal(_) => "signal",
        Request::List(_) => "list",
        Request::Info(_) => "info",
        _ => "other",
    }
}

async fn read_frame(s: &mut UnixStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await.ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).await.ok()?;
    Some(body)
}

async fn write_frame(s: &mut UnixStream, body: &[u8]) -> Option<()> {
    let len = u32::try_from(body.len()).ok()?;
    s.write_all(&len.to_be_bytes()).await.ok()?;
    s.write_all(body).await.ok()
}

/// One connection: handshake, then every request noted. The first `list` drops the
/// connection, later ones get an empty table; every action drops it.
async fn serve(mut s: UnixStream, seen: Seen) -> Option<()> {
    let hello = read_frame(&mut s).await?;
    let Ok(HelloOutcome::Ok(_)) = decode_hello(&hello) else {
        return None;
    };
    let welcome = Welcome {
        daemon_version: cuba_protocol::VERSION.into(),
        daemon_pid: std::process::id(),
        env: Vec::new(),
    };
    write_frame(&mut s, &encode_welcome(&welcome).ok()?).await?;
    loop {
        let frame: RequestFrame = wire::decode(&read_frame(&mut s).await?).ok()?;
        let name = name(&frame.request);
        let n = seen.note(name, token(&frame.request));
        // Dropping `s` is what a SIGKILLed daemon's connection does.
        if name != "list" || n == 1 {
            return None;
        }
        let reply = ResponseFrame {
            id: frame.id,
            response: Response::List(cuba_protocol::Listing::default()),
        };
        write_frame(&mut s, &wire::encode(&reply).ok()?).await?;
    }
}

fn stand_in(socket: &Path) -> Seen {
    let listener = UnixListener::bind(socket).expect("cannot bind the stand-in daemon");
    let seen = Seen::default();
    let counts = seen.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve(s, counts.clone()));
        }
    });
    seen
}

async fn setup() -> (TestDir, Seen, Mcp) {
    let t = TestDir::new();
    let socket = t.path().join("s");
    let seen = stand_in(&socket);
    let c = in_process(&socket, "lost-test").await;
    (t, seen, c)
}

/// Sent more than once, every time with one and the same token.
fn one_token_each_time(seen: &Seen, request: &str) {
    let tokens = seen.tokens(request);
    assert!(seen.count(request) > 1, "{request} was retried");
    assert_eq!(tokens.len(), 1, "{request}: {tokens:?}");
    assert!(
        tokens.iter().all(Option::is_some),
        "{request} carried a token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_lost_after_it_was_sent_is_sent_again_only_with_its_token() {
    let (_t, seen, c) = setup().await;
    for (tool, request) in [("start", "spawn"), ("run", "run")] {
        let r = c.call(tool, json!({ "command": "echo once" })).await;
        assert!(r.is_error(), "{tool}: {}", r.text());
        assert_eq!(r.code(), Some("UNAVAILABLE"), "{tool}: {}", r.text());
        assert!(
            r.text().contains("after the command was sent")
                && r.text().contains("list_processes shows it"),
            "{tool}: {}",
            r.text()
        );
        one_token_each_time(&seen, request);
    }
    let r = c
        .call(
            "start",
            json!({ "command": "echo once", "name": "w", "ensure": true }),
        )
        .await;
    assert_eq!(r.code(), Some("UNAVAILABLE"), "{}", r.text());
    one_token_each_time(&seen, "ensure");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_is_sent_again_with_its_token_and_a_lost_signal_is_not_sent_again() {
    let (_t, seen, c) = setup().await;
    let r = c
        .call("send_input", json!({ "id": 3, "text": "y\n" }))
        .await;
    assert_eq!(r.code(), Some("UNAVAILABLE"), "{}", r.text());
    assert!(r.text().contains("status(id=3)"), "{}", r.text());
    one_token_each_time(&seen, "stdin");
    let r = c.call("send_signal", json!({ "id": 3 })).await;
    assert_eq!(r.code(), Some("UNAVAILABLE"), "{}", r.text());
    assert!(r.text().contains("may have been delivered"), "{}", r.text());
    assert_eq!(seen.count("signal"), 1);
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_lost_on_the_way_is_asked_again() {
    let (_t, seen, c) = setup().await;
    let rows = c.rows(json!({})).await;
    assert!(rows.is_empty(), "{rows:?}");
    assert_eq!(
        seen.count("list"),
        2,
        "dropped once, answered on a new connection"
    );
    c.close().await;
}
