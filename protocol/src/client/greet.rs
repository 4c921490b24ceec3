//! The first exchange on a new connection: our hello, then the daemon's welcome or refusal,
//! within a time limit; a reply that is not the protocol (a bridge's login banner, noise) is
//! reported with its first bytes.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::ClientError;
use crate::handshake::{self, HandshakeError};
use crate::message::{Hello, Welcome};

/// Bytes of a reply that is not the protocol shown in the error.
const SHOWN_BYTES: usize = 64;

/// Says `hello` on `framed` and reads the welcome, within `limit`.
pub(super) async fn exchange<S>(
    framed: &mut Framed<S, LengthDelimitedCodec>,
    hello: &Hello,
    limit: Duration,
) -> Result<Welcome, ClientError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let hello = handshake::encode_hello(hello)?;
    let exchange = async {
        // A daemon that refuses at once (too many connections, no descriptors left) may
        // close before the hello is written: its reason is still there to read.
        let sent = framed.send(Bytes::from(hello)).await;
        match (framed.next().await, sent) {
            (Some(Ok(frame)), _) => handshake::decode_welcome(&frame).map_err(|e| match e {
                // The length read as a frame's was the start of something else.
                HandshakeError::BadMagic | HandshakeError::Truncated => {
                    not_protocol(&(frame.len() as u32).to_be_bytes(), &frame)
                }
                e => ClientError::from(e),
            }),
            (_, Err(e)) => Err(ClientError::Io(e)),
            // A length over the frame limit: text (a banner) or noise, not a frame.
            (Some(Err(e)), Ok(())) if e.kind() == io::ErrorKind::InvalidData => {
                Err(not_protocol(framed.read_buffer(), &[]))
            }
            (Some(Err(e)), Ok(())) => Err(ClientError::Io(e)),
            (None, Ok(())) if !framed.read_buffer().is_empty() => {
                Err(not_protocol(framed.read_buffer(), &[]))
            }
            (None, Ok(())) => Err(ClientError::Closed),
        }
    };
    tokio::time::timeout(limit, exchange).await.map_err(|_| {
        ClientError::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "cubad did not answer the handshake within {} s",
                limit.as_secs()
            ),
        ))
    })?
}

/// The handshake's reply was not the protocol: `head` then `rest`, the first bytes of it.
fn not_protocol(head: &[u8], rest: &[u8]) -> ClientError {
    let first: Vec<u8> = head.iter().chain(rest).take(SHOWN_BYTES).copied().collect();
    ClientError::Handshake(HandshakeError::NotProtocol(first))
}
