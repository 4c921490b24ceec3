//! `bridge`: the daemon's socket on stdin/stdout, byte for byte: a client speaks the protocol
//! through it as through the socket, and it exits when either side closes.

use crate::common;

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::mpsc;

use common::{wait_child, Env, OnPty, LIMIT};
use cuba_protocol::client::this_client;
use cuba_protocol::{
    handshake, wire, ClientKind, Hello, Request, RequestFrame, Response, ResponseFrame,
    SpawnRequest, WaitRequest, WaitSpec,
};

fn send(to: &mut ChildStdin, body: &[u8]) {
    to.write_all(&(body.len() as u32).to_be_bytes())
        .expect("write");
    to.write_all(body).expect("write");
    to.flush().expect("flush");
}

fn receive(from: &mut ChildStdout) -> Vec<u8> {
    let mut len = [0u8; 4];
    from.read_exact(&mut len).expect("a frame length");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    from.read_exact(&mut body).expect("a frame body");
    body
}

fn call(to: &mut ChildStdin, from: &mut ChildStdout, id: u64, request: Request) -> Response {
    send(
        to,
        &wire::encode(&RequestFrame { id, request }).expect("encode"),
    );
    let reply: ResponseFrame = wire::decode(&receive(from)).expect("decode");
    assert_eq!(reply.id, id);
    reply.response
}

/// `cubactl bridge` with its stdin and stdout in the test's hands.
fn bridge(env: &Env) -> (Child, ChildStdin, ChildStdout) {
    let mut child = env
        .std_cmd()
        .arg("bridge")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cubactl bridge");
    let to = child.stdin.take().expect("stdin");
    let from = child.stdout.take().expect("stdout");
    (child, to, from)
}

/// The hello of a client named "bridged", through the bridge.
fn send_hello(to: &mut ChildStdin) {
    let hello = Hello {
        client: this_client(ClientKind::Other, "bridged"),
        remote: false,
    };
    send(to, &handshake::encode_hello(&hello).expect("hello"));
}

#[test]
fn a_client_speaks_to_the_daemon_through_the_bridge() {
    let env = Env::new();
    let (mut bridge, mut to, mut from) = bridge(&env);
    // On a thread, so a bridge that hangs fails the test instead of blocking it.
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        send_hello(&mut to);
        // The daemon was not running: the bridge started it, and it welcomes us.
        let welcome = handshake::decode_welcome(&receive(&mut from)).expect("a welcome");
        let spawn = SpawnRequest {
            command: "echo through the bridge".into(),
            ..SpawnRequest::default()
        };
        let Response::Process(p) = call(&mut to, &mut from, 1, Request::Spawn(spawn)) else {
            panic!("no process");
        };
        let wait = WaitRequest {
            id: p.id,
            since: Some(0),
            spec: WaitSpec::exit(20_000, 1 << 20),
        };
        let Response::Waited(w) = call(&mut to, &mut from, 2, Request::Wait(wait)) else {
            panic!("no wait result");
        };
        // The end of the client's input ends the bridge.
        drop(to);
        let mut rest = Vec::new();
        let _ = from.read_to_end(&mut rest);
        let _ = done.send((
            welcome.daemon_pid,
            String::from_utf8_lossy(&w.output.bytes()).into_owned(),
            rest.len(),
        ));
    });
    let (daemon_pid, output, trailing) = finished.recv_timeout(LIMIT).unwrap_or_else(|_| {
        let _ = bridge.kill();
        panic!("the conversation through the bridge did not finish within {LIMIT:?}")
    });
    assert!(daemon_pid > 0);
    assert_eq!(output, "through the bridge\n");
    assert_eq!(trailing, 0, "nothing is added to the bytes");
    assert_eq!(wait_child(&mut bridge).code(), Some(0));
    // The daemon it reached is this test's, and keeps the process in its table.
    let ps = env.ps();
    assert!(
        ps.iter().any(|p| p["command"] == "echo through the bridge"),
        "{ps:?}"
    );
}

#[test]
fn the_bridge_refuses_a_terminal() {
    let env = Env::new();
    let mut on = OnPty::spawn(&env, &["bridge"], 80, 24);
    assert_eq!(wait_child(&mut on.child).code(), Some(2));
    on.screen.wait_for("stdin/stdout is a terminal");
}

/// The daemon going away ends the bridge, though its client's input is still open.
#[test]
fn the_bridge_ends_with_the_daemon() {
    let env = Env::new();
    let (mut bridge, mut to, mut from) = bridge(&env);
    send_hello(&mut to);
    // Bounded by the daemon's own handshake timeout should the bridge pass nothing on.
    handshake::decode_welcome(&receive(&mut from)).expect("a welcome");
    env.ok(&["daemon", "stop"]);
    assert_eq!(wait_child(&mut bridge).code(), Some(0));
    drop(to);
}
