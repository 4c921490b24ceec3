//! The daemon's end of the clients' transport: a Unix socket whose peer's uid the kernel names
//! (`unix.rs`), or on Windows a named pipe whose client's user the system names (`windows.rs`).
//! Both give the request path the same three things: the next connection, the word on its
//! peer (ours, another user's, or unknown), and the stream the framing runs on. A refusal is
//! written here too, before anything of the peer's is read.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{fd_limit, stream, Listener, Lock, Raw, Stream};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{stream, Listener, Lock, Raw, Stream};

/// Who is at the other end of a connection, as the system says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The peer's uid (0 on Windows, where the user is a SID, checked as `Check` says).
    pub uid: u32,
    pub pid: Option<i32>,
}

/// The system's word on a new connection's peer.
pub enum Check {
    /// This daemon's own user.
    Ours(Peer),
    /// Another user, refused with `why` before a byte of theirs is read.
    Foreign { peer: Peer, why: String },
    /// The system could not say: the connection is dropped.
    Unreadable(std::io::Error),
}

/// How long writing a refusal may take.
const REFUSE_WITHIN: Duration = Duration::from_secs(5);
/// How long a refused peer has to read the refusal and close.
const LINGER: Duration = Duration::from_secs(1);

/// Refuses a peer before reading anything from it with `frame` (`handshake::encode_refusal…`),
/// written with its length prefix.
pub async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, frame: Vec<u8>) {
    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX).to_be_bytes();
    let write = async {
        stream.write_all(&len).await?;
        stream.write_all(&frame).await
    };
    if let Ok(Ok(())) = tokio::time::timeout(REFUSE_WITHIN, write).await {
        linger(&mut stream).await;
    }
}

/// After a refusal: says end of file, then reads (and drops) what the peer still sends until
/// it closes, bounded. Closing with its hello unread would reset the connection, and a client
/// still writing would see a broken pipe instead of the reason.
pub async fn linger<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 8192];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(1..) = stream.read(&mut sink).await {}
    })
    .await;
}
