//! The connection's reader: reply frames routed to the requests awaiting them, and what the far
//! end did when it stopped speaking the protocol (bytes that are not a reply, a frame begun and
//! never finished), kept so that every request then failing says so instead of "closed".

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt, Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Decoder, Encoder, Framed, LengthDelimitedCodec};

use super::stream::{lock, route};
use super::{ClientError, Health, Pending};
use crate::handshake::shown;
use crate::message::{Response, ResponseFrame};
use crate::wire::{self, MAX_FRAME};

/// Bytes of a reply that is not the protocol quoted in the error.
const SHOWN_BYTES: usize = 64;
/// Checks of a stalled frame per stall limit.
const STALL_TICKS: u32 = 4;

/// The protocol's length-delimited codec, noting how many bytes of an unfinished frame wait
/// in the read buffer (for telling a stalled frame from an idle connection).
pub(super) struct Watched {
    inner: LengthDelimitedCodec,
    pub(super) buffered: Arc<AtomicUsize>,
}

impl Watched {
    pub(super) fn new(inner: LengthDelimitedCodec) -> Watched {
        Watched {
            inner,
            buffered: Arc::default(),
        }
    }
}

impl Decoder for Watched {
    type Item = BytesMut;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<BytesMut>> {
        let out = self.inner.decode(src);
        self.buffered.store(src.len(), Ordering::Relaxed);
        out
    }
}

impl Encoder<Bytes> for Watched {
    type Error = io::Error;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> io::Result<()> {
        self.inner.encode(item, dst)
    }
}

/// What a frame that does not decode as a reply says about the far end.
fn not_a_reply(frame: &[u8]) -> String {
    let len = (frame.len() as u32).to_be_bytes();
    let first: Vec<u8> = len.iter().chain(frame).take(SHOWN_BYTES).copied().collect();
    format!(
        "sent bytes that are not cuba-exec's protocol ({})",
        shown(&first)
    )
}

/// The first frame after the welcome, if one is there already: bytes that are not the protocol
/// (a bridge that prints after the welcome) or a closed connection fail the connection before
/// any request is sent; a reply that does decode is handed to the reader.
pub(super) fn early<S>(
    source: &mut Framed<S, Watched>,
    from: &str,
) -> Result<Option<ResponseFrame>, ClientError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match source.next().now_or_never() {
        None => Ok(None),
        Some(None) => Err(ClientError::Closed),
        Some(Some(Ok(frame))) => wire::decode::<ResponseFrame>(&frame)
            .map(Some)
            .map_err(|_| ClientError::Broken {
                from: from.to_string(),
                why: not_a_reply(&frame),
                sent: false,
            }),
        Some(Some(Err(e))) => Err(match e.kind() {
            io::ErrorKind::InvalidData => ClientError::Broken {
                from: from.to_string(),
                why: over_limit(source.read_buffer()),
                sent: false,
            },
            _ => ClientError::Io(e),
        }),
    }
}

/// A length over the frame limit; `head`, the bytes from it on, where they are known.
fn over_limit(head: &[u8]) -> String {
    let shown = match head.is_empty() {
        true => String::new(),
        false => format!("{}: ", shown(&head[..head.len().min(SHOWN_BYTES)])),
    };
    format!(
        "sent bytes that are not cuba-exec's protocol ({shown}a frame length over the {} MiB \
         limit)",
        MAX_FRAME >> 20
    )
}

/// Reads frames until the connection ends, routing each; then marks the connection dead (with
/// the far end's fault, if it broke the protocol) and wakes every waiter. `stall`: how long an
/// unfinished frame may wait for its next byte (a bridge's far end that stopped mid-reply);
/// `None` waits as long as the connection lives.
pub(super) async fn read<S>(
    mut source: S,
    first: Option<ResponseFrame>,
    buffered: Arc<AtomicUsize>,
    stall: Option<Duration>,
    routes: Pending,
    health: Arc<Health>,
) where
    S: Stream<Item = io::Result<BytesMut>> + Unpin,
{
    let why = 'read: {
        if let Some(reply) = first {
            if !deliver(reply, &routes, &health) {
                break 'read None;
            }
        }
        let tick = stall.map(|s| s / STALL_TICKS);
        let mut stalled = 0u32;
        let mut seen = 0usize;
        loop {
            let next = match tick {
                None => source.next().await,
                Some(tick) => match tokio::time::timeout(tick, source.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        // No frame this tick: a stall only if a frame has begun and not
                        // one byte of it came since the last tick.
                        let now = buffered.load(Ordering::Relaxed);
                        stalled = if now > 0 && now == seen {
                            stalled + 1
                        } else {
                            0
                        };
                        seen = now;
                        if stalled >= STALL_TICKS {
                            break 'read Some(format!(
                                "sent part of a reply ({now} bytes), then nothing for {} s",
                                stall.unwrap_or_default().as_secs_f32()
                            ));
                        }
                        continue;
                    }
                },
            };
            stalled = 0;
            match next {
                Some(Ok(frame)) => match wire::decode::<ResponseFrame>(&frame) {
                    Ok(reply) => {
                        if !deliver(reply, &routes, &health) {
                            break 'read None;
                        }
                    }
                    Err(_) => break 'read Some(not_a_reply(&frame)),
                },
                Some(Err(e)) if e.kind() == io::ErrorKind::InvalidData => {
                    break 'read Some(over_limit(&[]))
                }
                // The codec's "bytes remaining on stream": closed in the middle of a frame.
                Some(Err(_)) if buffered.load(Ordering::Relaxed) > 0 => {
                    break 'read Some(format!(
                        "closed the connection in the middle of a reply ({} bytes of it came)",
                        buffered.load(Ordering::Relaxed)
                    ))
                }
                Some(Err(_)) | None => break 'read None,
            }
        }
    };
    if let Some(why) = why {
        *lock(&health.broken) = Some(why);
    }
    health.alive.store(false, Ordering::SeqCst);
    // Dropping every sender wakes every waiter with "closed" (or "gone", or the fault above).
    lock(&routes).clear();
}

/// A bridge's stdin, kept to count what it never read.
#[cfg(unix)]
pub(crate) type Pipe = std::os::fd::OwnedFd;
#[cfg(windows)]
pub(crate) type Pipe = std::os::windows::io::OwnedHandle;

/// Bytes written to `pipe` that its reader has not read (`FIONREAD`; Linux counts them on the
/// write end too; where a system does not, this is `Some(0)` and nothing is taken as unsent).
#[cfg(unix)]
pub(super) fn unread(pipe: &Pipe) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which points at `n`; the
    // descriptor is ours for as long as `pipe` lives.
    let rc = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut n) };
    (rc == 0).then_some(n as u64)
}

/// Windows cannot count a pipe's unread bytes from its write end: unknown.
#[cfg(windows)]
pub(super) fn unread(_: &Pipe) -> Option<u64> {
    None
}

/// Routes `reply`; false when it is the daemon's notice that it closes the connection.
fn deliver(reply: ResponseFrame, routes: &Pending, health: &Health) -> bool {
    if let (0, Response::Closing { .. }) = (reply.id, &reply.response) {
        // Before the connection is marked dead: a waiter woken by the clear must already see
        // that its request was never read.
        health.unseen.store(true, Ordering::SeqCst);
        return false;
    }
    route(routes, reply);
    true
}
