//! Frames by hand on a bare `UnixStream`: what a broken or hostile client would send. The
//! layout is the protocol's: a 4-byte big-endian length, then the body.

use std::path::Path;
use std::time::Duration;

use cuba_protocol::client::this_client;
use cuba_protocol::handshake::{self, encode_hello};
use cuba_protocol::{wire, ClientInfo, ClientKind, Hello, Request, RequestFrame, ResponseFrame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::bounded;

const IO_LIMIT: Duration = Duration::from_secs(10);

/// Offset of the status byte in a handshake reply body: magic, version, daemon pid.
pub const STATUS_AT: usize = 12;

pub async fn connect(socket: &Path) -> UnixStream {
    bounded("raw connect", IO_LIMIT, UnixStream::connect(socket))
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", socket.display()))
}

/// Writes `body` as one frame.
pub async fn write_frame(s: &mut UnixStream, body: &[u8]) {
    let len = u32::try_from(body.len()).expect("frame fits a u32 length");
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    bounded("raw write", IO_LIMIT, s.write_all(&frame))
        .await
        .expect("raw write failed");
}

/// Reads one frame's body; `None` when the peer closed the connection (also when it reset it).
pub async fn read_frame(s: &mut UnixStream) -> Option<Vec<u8>> {
    bounded("raw read", IO_LIMIT, async {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).await.ok()?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).await.ok()?;
        Some(body)
    })
    .await
}

/// True once the peer has closed: the next read finds end of file (or a reset).
pub async fn closed(s: &mut UnixStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        bounded("raw read to EOF", IO_LIMIT, s.read(&mut buf)).await,
        Ok(0) | Err(_)
    )
}

/// A valid hello body; with `full_env` the test process's environment, else an empty one.
pub fn hello(full_env: bool) -> Vec<u8> {
    let mut client = this_client(ClientKind::Other, "raw");
    if !full_env {
        client.env.clear();
    }
    encode_hello(&Hello {
        client,
        remote: false,
    })
    .expect("a hello encodes")
}

/// The hello of `client`.
pub fn hello_of(client: ClientInfo) -> Vec<u8> {
    encode_hello(&Hello {
        client,
        remote: false,
    })
    .expect("a hello encodes")
}

/// Writes `body` as one frame, ignoring a peer that closed meanwhile (a refusal may come
/// before the whole frame is written); true if all of it was written.
pub async fn write_frame_lenient(s: &mut UnixStream, body: &[u8]) -> bool {
    let len = u32::try_from(body.len()).expect("frame fits a u32 length");
    bounded("raw write", IO_LIMIT, async {
        s.write_all(&len.to_be_bytes()).await.is_ok() && s.write_all(body).await.is_ok()
    })
    .await
}

/// Sends a valid hello and checks the daemon welcomes it.
pub async fn handshake(s: &mut UnixStream) {
    write_frame(s, &hello(false)).await;
    let reply = read_frame(s).await.expect("no reply to the hello");
    if let Err(e) = handshake::decode_welcome(&reply) {
        panic!("the daemon refused a valid hello: {e}");
    }
}

/// A connected and welcomed bare stream.
pub async fn welcomed(socket: &Path) -> UnixStream {
    let mut s = connect(socket).await;
    handshake(&mut s).await;
    s
}

/// The body of request frame `id`.
pub fn request(id: u64, request: Request) -> Vec<u8> {
    wire::encode(&RequestFrame { id, request }).expect("a request encodes")
}

/// Decodes a response frame body, failing the test if it is not one.
pub fn response(body: &[u8]) -> ResponseFrame {
    wire::decode(body).unwrap_or_else(|e| panic!("not a response frame ({e}): {body:02x?}"))
}

/// The reason text of a handshake refusal (status byte 1, or 2 for another user's peer), or `None`
/// for a welcome.
pub fn refusal(body: &[u8]) -> Option<String> {
    assert!(
        body.len() > STATUS_AT && body.starts_with(handshake::MAGIC),
        "not a handshake reply: {body:02x?}"
    );
    (body[STATUS_AT] != 0).then(|| String::from_utf8_lossy(&body[STATUS_AT + 1..]).into_owned())
}
