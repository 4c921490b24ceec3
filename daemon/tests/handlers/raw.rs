//! A connection without the client library: bytes as a broken or hostile client sends them
//! (another protocol version, a frame over the limit, a body that does not decode). The
//! transport is the OS's: a Unix socket, or the named pipe on Windows.

use std::path::Path;

use cuba_protocol::{handshake, wire, Hello, ResponseFrame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::fixture::bounded;

#[cfg(unix)]
pub type Stream = tokio::net::UnixStream;
#[cfg(windows)]
pub type Stream = tokio::net::windows::named_pipe::NamedPipeClient;

pub async fn connect(socket: &Path) -> Stream {
    #[cfg(unix)]
    let stream = tokio::net::UnixStream::connect(socket).await;
    #[cfg(windows)]
    let stream = cuba_protocol::win::open_pipe(socket).await;
    stream.expect("cannot connect to cubad")
}

/// Writes a length prefix of `len` and then `body` (which may be shorter: a lie).
pub async fn send(s: &mut Stream, len: usize, body: &[u8]) {
    let prefix = u32::try_from(len).expect("a length the prefix can hold");
    let mut frame = prefix.to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    bounded("write", s.write_all(&frame))
        .await
        .expect("cannot write to cubad");
}

/// Writes `body` as one frame.
pub async fn send_frame(s: &mut Stream, body: &[u8]) {
    send(s, body.len(), body).await;
}

/// The next frame's body; `None` once the daemon has closed the connection (a pipe's far end
/// gone reads as an error on Windows, the end of the stream on Unix).
pub async fn read_frame(s: &mut Stream) -> Option<Vec<u8>> {
    bounded("read", async {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).await.ok()?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).await.ok()?;
        Some(body)
    })
    .await
}

/// The daemon's next response frame.
pub async fn read_response(s: &mut Stream) -> ResponseFrame {
    let body = read_frame(s)
        .await
        .expect("cubad closed instead of answering");
    wire::decode(&body).expect("an answer that does not decode")
}

/// The handshake, welcomed.
pub async fn greet(s: &mut Stream) {
    let hello = Hello {
        client: crate::fixture::client_info(),
        remote: false,
    };
    send_frame(s, &handshake::encode_hello(&hello).expect("a hello")).await;
    let reply = read_frame(s).await.expect("no answer to the hello");
    handshake::decode_welcome(&reply).expect("the hello was refused");
}
