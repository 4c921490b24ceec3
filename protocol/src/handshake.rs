//! The version handshake, in a fixed layout that does not depend on the body encoding, so a
//! client and a daemon of different versions can always tell each other so.
//!
//! ```text
//! client -> daemon: "CUBA" | version: u32 BE | body: Hello
//! daemon -> client: "CUBA" | version: u32 BE | daemon pid: u32 BE | status: u8 | rest
//!                   status 0: rest = body: Welcome;  status 1: rest = UTF-8 reason
//! ```

use crate::message::{Hello, Welcome};
use crate::wire::{self, WireError};
use crate::PROTOCOL_VERSION;

pub const MAGIC: &[u8; 4] = b"CUBA";
const PREFIX: usize = 8;
const REPLY_PREFIX: usize = 13;

#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("the peer is not a cuba-exec endpoint (bad magic bytes)")]
    BadMagic,
    #[error(
        "cubad (pid {daemon_pid}) speaks protocol version {daemon}, this client speaks {client}; \
         restart the daemon with `cubactl daemon restart` (or `kill {daemon_pid}`) so the \
         installed version starts"
    )]
    VersionMismatch {
        daemon: u32,
        client: u32,
        daemon_pid: u32,
    },
    #[error("cubad refused the connection: {0}")]
    Refused(String),
    /// The daemon serves another user: its reason names both uids.
    #[error("cubad refused the connection: {0}")]
    AnotherUser(String),
    #[error("handshake frame is truncated")]
    Truncated,
    /// What came back is not the protocol at all (a login banner, noise): its first bytes.
    #[error("the peer is not a cuba-exec endpoint: it wrote {}", shown(.0))]
    NotProtocol(Vec<u8>),
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// Bytes for a message: text as text (quoted), anything else in hex.
pub fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let printable = text
        .chars()
        .all(|c| !c.is_control() || c == '\n' || c == '\r' || c == '\t');
    if printable && !bytes.is_empty() {
        format!("{:?}", text.trim_end())
    } else {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("bytes {}", hex.join(" "))
    }
}

fn prefix(version: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_be_bytes());
    out
}

/// The client's first frame.
pub fn encode_hello(hello: &Hello) -> Result<Vec<u8>, WireError> {
    let mut out = prefix(PROTOCOL_VERSION);
    wire::encode_into(hello, &mut out)?;
    Ok(out)
}

/// What the daemon learns from a client's first frame.
#[derive(Debug)]
pub enum HelloOutcome {
    Ok(Hello),
    /// The client speaks another protocol version: answer with [`encode_refusal`].
    WrongVersion(u32),
}

pub fn decode_hello(frame: &[u8]) -> Result<HelloOutcome, HandshakeError> {
    let version = check_prefix(frame)?;
    if version != PROTOCOL_VERSION {
        return Ok(HelloOutcome::WrongVersion(version));
    }
    Ok(HelloOutcome::Ok(wire::decode(&frame[PREFIX..])?))
}

fn check_prefix(frame: &[u8]) -> Result<u32, HandshakeError> {
    if frame.len() < PREFIX {
        return Err(if frame.starts_with(&MAGIC[..frame.len().min(4)]) {
            HandshakeError::Truncated
        } else {
            HandshakeError::BadMagic
        });
    }
    if &frame[..4] != MAGIC {
        return Err(HandshakeError::BadMagic);
    }
    Ok(u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]))
}

fn reply_prefix(daemon_pid: u32, status: u8) -> Vec<u8> {
    let mut out = prefix(PROTOCOL_VERSION);
    out.extend_from_slice(&daemon_pid.to_be_bytes());
    out.push(status);
    out
}

/// The daemon's reply accepting a client.
pub fn encode_welcome(welcome: &Welcome) -> Result<Vec<u8>, WireError> {
    let mut out = reply_prefix(welcome.daemon_pid, WELCOME);
    wire::encode_into(welcome, &mut out)?;
    Ok(out)
}

/// Status bytes of the daemon's reply.
const WELCOME: u8 = 0;
const REFUSED: u8 = 1;
const ANOTHER_USER: u8 = 2;

/// The daemon's reply refusing a client (wrong version, or a reason of its own).
pub fn encode_refusal(daemon_pid: u32, reason: &str) -> Vec<u8> {
    refusal(daemon_pid, REFUSED, reason)
}

/// The daemon's reply refusing a peer of another user: a client knows it by its status
/// ([`HandshakeError::AnotherUser`]), not by the reason's words.
pub fn encode_refusal_of_another_user(daemon_pid: u32, reason: &str) -> Vec<u8> {
    refusal(daemon_pid, ANOTHER_USER, reason)
}

fn refusal(daemon_pid: u32, status: u8, reason: &str) -> Vec<u8> {
    let mut out = reply_prefix(daemon_pid, status);
    out.extend_from_slice(reason.as_bytes());
    out
}

/// The client reads the daemon's reply.
pub fn decode_welcome(frame: &[u8]) -> Result<Welcome, HandshakeError> {
    let version = check_prefix(frame)?;
    if frame.len() < REPLY_PREFIX {
        return Err(HandshakeError::Truncated);
    }
    let daemon_pid = u32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
    if version != PROTOCOL_VERSION {
        return Err(HandshakeError::VersionMismatch {
            daemon: version,
            client: PROTOCOL_VERSION,
            daemon_pid,
        });
    }
    let reason = || String::from_utf8_lossy(&frame[REPLY_PREFIX..]).into_owned();
    match frame[12] {
        WELCOME => Ok(wire::decode(&frame[REPLY_PREFIX..])?),
        ANOTHER_USER => Err(HandshakeError::AnotherUser(reason())),
        _ => Err(HandshakeError::Refused(reason())),
    }
}
