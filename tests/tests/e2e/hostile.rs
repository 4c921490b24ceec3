//! Hostile and broken peers on the raw socket: garbage instead of a hello, undecodable and
//! oversized frames, a client vanishing mid-call, a peer of another uid, another protocol
//! version. The daemon answers clearly where it can and keeps serving everyone else.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cuba_protocol::{ErrorKind, ProcState, Request, Response, WaitRequest, WaitSpec};
use cuba_tests::raw::{self, STATUS_AT};
use cuba_tests::{bounded, pid_alive, spawn, wait_for, Step, TestDaemon, STEP};

/// Deterministic noise (xorshift), so a failure reproduces.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

/// The daemon still serves a fresh, well-behaved client.
async fn still_serves(d: &TestDaemon) {
    let c = d.client().await;
    let status = bounded("status", STEP, c.status()).await.unwrap();
    assert_eq!(status.pid, d.pid() as u32);
}

/// Reads one frame and checks it is a connection-level error (id 0) of kind BadRequest.
async fn expect_bad_request(s: &mut tokio::net::UnixStream) -> String {
    let frame = raw::read_frame(s).await.expect("no error frame");
    match raw::response(&frame) {
        cuba_protocol::ResponseFrame {
            id: 0,
            response: Response::Error(e),
        } => {
            assert_eq!(e.kind, ErrorKind::BadRequest, "{e}");
            e.message
        }
        other => panic!("expected an error frame with id 0, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_instead_of_a_hello_is_refused() {
    let d = TestDaemon::start().await;
    let mut s = raw::connect(d.socket()).await;
    raw::write_frame(&mut s, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let reply = raw::read_frame(&mut s).await.expect("no refusal");
    let reason = raw::refusal(&reply).expect("a refusal, not a welcome");
    assert!(reason.contains("not a cuba-exec endpoint"), "{reason}");
    assert!(raw::closed(&mut s).await, "the connection stayed open");
    still_serves(&d).await;

    // An oversized first frame is refused before anything is allocated.
    let mut s = raw::connect(d.socket()).await;
    bounded("write", STEP, async {
        use tokio::io::AsyncWriteExt;
        s.write_all(&0xFFFF_FFF0u32.to_be_bytes()).await.unwrap();
    })
    .await;
    let reply = raw::read_frame(&mut s).await.expect("no refusal");
    assert!(raw::refusal(&reply).is_some(), "{reply:02x?}");
    assert!(raw::closed(&mut s).await);
    still_serves(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_frame_is_reported_and_the_connection_goes_on() {
    let d = TestDaemon::start().await;
    let mut s = raw::welcomed(d.socket()).await;
    for (len, seed) in [(64, 1), (1, 7), (4096, 42)] {
        raw::write_frame(&mut s, &noise(len, seed)).await;
        let message = expect_bad_request(&mut s).await;
        assert!(!message.is_empty());
    }
    // An empty frame too.
    raw::write_frame(&mut s, &[]).await;
    expect_bad_request(&mut s).await;
    raw::write_frame(&mut s, &raw::request(5, Request::DaemonStatus)).await;
    let frame = raw::read_frame(&mut s).await.expect("no status reply");
    match raw::response(&frame) {
        cuba_protocol::ResponseFrame {
            id: 5,
            response: Response::DaemonStatus(st),
        } => assert_eq!(st.pid, d.pid() as u32),
        other => panic!("unexpected reply: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_length_gets_an_error_then_the_connection_closes() {
    let d = TestDaemon::start().await;
    let mut s = raw::welcomed(d.socket()).await;
    bounded("write", STEP, async {
        use tokio::io::AsyncWriteExt;
        s.write_all(&0xFFFF_FFF0u32.to_be_bytes()).await.unwrap();
    })
    .await;
    expect_bad_request(&mut s).await;
    assert!(raw::closed(&mut s).await, "the connection stayed open");
    still_serves(&d).await;
}

/// Waits until the daemon counts `n` clients (connections end without an event this test
/// could await: re-check).
async fn clients_become(c: &cuba_protocol::client::Client, n: u32) {
    let mut clients = u32::MAX;
    for _ in 0..500 {
        clients = bounded("status", STEP, c.status()).await.unwrap().clients;
        if clients == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the daemon counts {clients} clients, not {n}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_vanishing_mid_wait_harms_nothing() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "sleep 100").await;
    clients_become(&c, 1).await;
    let mut s = raw::welcomed(d.socket()).await;
    let wait = WaitRequest {
        id: p.id,
        since: None,
        spec: WaitSpec::exit(60_000, 1024),
    };
    raw::write_frame(&mut s, &raw::request(1, Request::Wait(wait))).await;
    // A reply to a later request proves the wait is being served.
    raw::write_frame(&mut s, &raw::request(2, Request::DaemonStatus)).await;
    let frame = raw::read_frame(&mut s).await.expect("no status reply");
    let reply = raw::response(&frame);
    assert_eq!(reply.id, 2, "{reply:?}");
    match reply.response {
        Response::DaemonStatus(st) => assert_eq!(st.clients, 2),
        other => panic!("unexpected reply: {other:?}"),
    }
    drop(s);

    // The daemon lets go of the vanished client and its wait.
    clients_become(&c, 1).await;
    let info = c.info(p.id).step().await.unwrap();
    assert_eq!(info.state, ProcState::Running, "{info:?}");
    assert!(pid_alive(p.pid as i32));
    still_serves(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_protocol_version_is_told_how_to_restart() {
    let d = TestDaemon::start().await;
    let mut s = raw::connect(d.socket()).await;
    let mut hello = raw::hello(true);
    hello[4..8].copy_from_slice(&999u32.to_be_bytes());
    raw::write_frame(&mut s, &hello).await;
    let reply = raw::read_frame(&mut s).await.expect("no refusal");
    let reason = raw::refusal(&reply).expect("a refusal, not a welcome");
    assert!(reason.contains("cubactl daemon restart"), "{reason}");
    assert!(reason.contains("999"), "{reason}");
    // The reply carries the daemon's own version and pid in the fixed layout.
    assert_eq!(reply[4..8], cuba_protocol::PROTOCOL_VERSION.to_be_bytes());
    assert_eq!(reply[8..STATUS_AT], (d.pid() as u32).to_be_bytes());
    assert!(raw::closed(&mut s).await);
    still_serves(&d).await;
}

/// Connects as `nobody`, sends a hello (hex on argv) and prints the reply's bytes in hex.
const PEER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
body = bytes.fromhex(sys.argv[2])
try:
    s.sendall(len(body).to_bytes(4, "big") + body)
except OSError:
    pass
data = b""
while True:
    try:
        chunk = s.recv(65536)
    except OSError:
        break
    if not chunk:
        break
    data += chunk
print(data.hex())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_of_another_uid_is_refused() {
    if !cuba_tests::machine::root() {
        cuba_tests::machine::skip("a peer of another uid", "running as another uid needs root");
        return;
    }
    let d = TestDaemon::start().await;
    // Open the door wide: only the daemon's own check stands between `nobody` and the socket.
    std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(d.socket(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("python3");
    let hex: String = raw::hello(false)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg("-c")
        .arg(PEER)
        .arg(d.socket())
        .arg(hex)
        .current_dir("/")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .uid(65534)
        .gid(65534)
        .kill_on_drop(true);
    let out = bounded("python peer", STEP, cmd.output()).await.unwrap();
    assert!(out.status.success(), "python failed: {out:?}");
    let hex = String::from_utf8(out.stdout).unwrap();
    let bytes: Vec<u8> = (0..hex.trim().len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert!(bytes.len() > 4 + STATUS_AT, "short reply: {bytes:02x?}");
    let body = &bytes[4..];
    assert_eq!(
        u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize,
        body.len()
    );
    let reason = raw::refusal(body).expect("a refusal, not a welcome");
    assert!(reason.contains("permission denied"), "{reason}");
    assert!(reason.contains("65534"), "{reason}");
    // Known as another user's by its status, not by the words (cubactl's hint hangs on it).
    assert!(
        matches!(
            cuba_protocol::handshake::decode_welcome(body),
            Err(cuba_protocol::handshake::HandshakeError::AnotherUser(r)) if r == reason
        ),
        "{body:02x?}"
    );
    // Nothing of the refused peer reached the table; the owner is still served.
    assert!(wait_for(|| d.log().contains("refused a peer"), STEP).await);
    let c = d.client().await;
    assert!(c.list(Default::default()).step().await.unwrap().is_empty());
}
