//! The client against a stand-in daemon on a temp socket: what it does with the daemon's
//! notice that it closes an idle connection, and with a refusal that comes before its hello
//! could be written.

#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use cuba_protocol::client::{this_client, Client, ClientError};
use cuba_protocol::handshake::{self, HandshakeError, HelloOutcome};
use cuba_protocol::{
    wire, ClientKind, ListRequest, RequestFrame, Response, ResponseFrame, Welcome,
};
use futures_util::{SinkExt, StreamExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::Framed;

const LIMIT: Duration = Duration::from_secs(10);

async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, fut).await.expect("timed out")
}

/// Accepts one connection and welcomes it.
async fn welcomed(
    listener: &UnixListener,
) -> Framed<UnixStream, tokio_util::codec::LengthDelimitedCodec> {
    let (s, _) = listener.accept().await.unwrap();
    let mut framed = Framed::new(s, wire::codec());
    let hello = framed.next().await.unwrap().unwrap();
    assert!(matches!(
        handshake::decode_hello(&hello).unwrap(),
        HelloOutcome::Ok(_)
    ));
    let welcome = Welcome {
        daemon_version: "test".into(),
        daemon_pid: 1,
        env: Vec::new(),
    };
    let frame = handshake::encode_welcome(&welcome).unwrap();
    framed.send(Bytes::from(frame)).await.unwrap();
    framed
}

fn frame(id: u64, response: Response) -> Bytes {
    Bytes::from(wire::encode(&ResponseFrame { id, response }).unwrap())
}

fn closing() -> Bytes {
    let reason = "idle".to_string();
    frame(0, Response::Closing { reason })
}

async fn connect(socket: &Path) -> Client {
    bounded(Client::connect(socket, this_client(ClientKind::Other, "t")))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_unanswered_at_a_closing_notice_were_never_sent() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s");
    let listener = UnixListener::bind(&socket).unwrap();
    let daemon = tokio::spawn(async move {
        let mut framed = welcomed(&listener).await;
        // Two requests: the first is answered, then the notice; the second stays unanswered.
        let first: RequestFrame = wire::decode(&framed.next().await.unwrap().unwrap()).unwrap();
        let _second = framed.next().await.unwrap().unwrap();
        framed
            .send(frame(
                first.id,
                Response::List(cuba_protocol::Listing::default()),
            ))
            .await
            .unwrap();
        framed.send(closing()).await.unwrap();
    });
    let c = connect(&socket).await;
    let (a, b) = bounded(async {
        tokio::join!(
            c.list(ListRequest::default()),
            c.list(ListRequest::default())
        )
    })
    .await;
    let (answered, gone) = match (a, b) {
        (Ok(l), Err(e)) | (Err(e), Ok(l)) => (l, e),
        other => panic!("expected one answer and one failure: {other:?}"),
    };
    assert!(answered.is_empty());
    assert!(matches!(gone, ClientError::Gone), "{gone}");
    assert!(gone.nothing_sent() && gone.connection_lost());
    assert!(!c.is_alive(), "the connection still counts as alive");
    // A request after the notice is not sent either.
    let later = bounded(c.list(ListRequest::default())).await.unwrap_err();
    assert!(matches!(later, ClientError::Gone), "{later}");
    daemon.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_without_a_notice_may_have_carried_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s");
    let listener = UnixListener::bind(&socket).unwrap();
    let daemon = tokio::spawn(async move {
        let mut framed = welcomed(&listener).await;
        let _request = framed.next().await.unwrap().unwrap();
        // Dropped: what a daemon that dies after reading does.
    });
    let c = connect(&socket).await;
    let e = bounded(c.list(ListRequest::default())).await.unwrap_err();
    assert!(matches!(e, ClientError::Closed), "{e}");
    assert!(!e.nothing_sent());
    daemon.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_read_even_when_the_hello_could_not_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s");
    let listener = UnixListener::bind(&socket).unwrap();
    let daemon = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        let mut framed = Framed::new(s, wire::codec());
        let refusal = handshake::encode_refusal(1, "too many connections");
        framed.send(Bytes::from(refusal)).await.unwrap();
        // Closed without reading: the client's large hello cannot be written in full.
    });
    let mut client = this_client(ClientKind::Other, "t");
    client.env = vec![(OsString::from("BIG"), OsString::from("x".repeat(4 << 20)))];
    let e = bounded(Client::connect(&socket, client))
        .await
        .err()
        .unwrap();
    match e {
        ClientError::Handshake(HandshakeError::Refused(reason)) => {
            assert_eq!(reason, "too many connections");
        }
        other => panic!("expected the refusal, got: {other}"),
    }
    daemon.await.unwrap();
}
