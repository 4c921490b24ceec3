//! The SOCKS5 side of the proxy (RFC 1928): no authentication, CONNECT only, the address as a
//! name, IPv4 or IPv6. The handshake is read field by field straight from the socket, so what
//! the client sends after its request stays there for the relay.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

use super::rules::normalise;
use super::{open, Dest, Gate, Refusal, Via};

/// The first byte of every SOCKS5 message.
pub(super) const VERSION: u8 = 5;

const NO_AUTH: u8 = 0x00;
const NO_ACCEPTABLE_METHOD: u8 = 0xFF;
const CMD_CONNECT: u8 = 0x01;

/// Reply codes.
const SUCCEEDED: u8 = 0x00;
const GENERAL_FAILURE: u8 = 0x01;
const NOT_ALLOWED: u8 = 0x02;
const NETWORK_UNREACHABLE: u8 = 0x03;
const HOST_UNREACHABLE: u8 = 0x04;
const CONNECTION_REFUSED: u8 = 0x05;
const COMMAND_NOT_SUPPORTED: u8 = 0x07;
const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;

/// A handshake that named no destination.
enum Fail {
    /// Closed, reset, or not SOCKS5 after all: nothing to answer.
    Gone,
    /// The greeting offered no "no authentication".
    NoMethod,
    /// A request answered with this reply code.
    Reply(u8),
}

impl From<std::io::Error> for Fail {
    fn from(_: std::io::Error) -> Fail {
        Fail::Gone
    }
}

pub(super) async fn serve(
    mut stream: TcpStream,
    gate: &dyn Gate,
    deadline: Instant,
    limit: Duration,
) {
    let dest = match timeout_at(deadline, handshake(&mut stream)).await {
        Ok(Ok(dest)) => dest,
        Ok(Err(Fail::NoMethod)) => {
            let _ = stream.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await;
            return;
        }
        Ok(Err(Fail::Reply(code))) => return refuse(stream, code).await,
        Ok(Err(Fail::Gone)) | Err(_) => return,
    };
    let mut upstream = match open(gate, &dest, limit).await {
        Ok(up) => up,
        Err(refusal) => return refuse(stream, code(&refusal)).await,
    };
    let bound = upstream.local_addr().ok();
    if stream.write_all(&reply(SUCCEEDED, bound)).await.is_err() {
        return;
    }
    let _ = super::relay(&mut stream, &mut upstream).await;
}

/// The greeting, its answer, and the request.
async fn handshake(stream: &mut TcpStream) -> Result<Dest, Fail> {
    let mut greeting = [0u8; 2];
    stream.read_exact(&mut greeting).await?;
    let mut methods = [0u8; 255];
    let methods = &mut methods[..usize::from(greeting[1])];
    stream.read_exact(methods).await?;
    if !methods.contains(&NO_AUTH) {
        return Err(Fail::NoMethod);
    }
    stream.write_all(&[VERSION, NO_AUTH]).await?;

    let mut request = [0u8; 4];
    stream.read_exact(&mut request).await?;
    let [version, command, _, address_type] = request;
    if version != VERSION {
        return Err(Fail::Gone);
    }
    let host = match address_type {
        0x01 => {
            let mut a = [0u8; 4];
            stream.read_exact(&mut a).await?;
            Ipv4Addr::from(a).to_string()
        }
        0x04 => {
            let mut a = [0u8; 16];
            stream.read_exact(&mut a).await?;
            Ipv6Addr::from(a).to_string()
        }
        0x03 => {
            let mut len = [0u8; 1];
            stream.read_exact(&mut len).await?;
            let mut name = [0u8; 255];
            let name = &mut name[..usize::from(len[0])];
            stream.read_exact(name).await?;
            let name = std::str::from_utf8(name).map_err(|_| Fail::Reply(GENERAL_FAILURE))?;
            normalise(name).map_err(|_| Fail::Reply(GENERAL_FAILURE))?
        }
        _ => return Err(Fail::Reply(ADDRESS_TYPE_NOT_SUPPORTED)),
    };
    let mut port = [0u8; 2];
    stream.read_exact(&mut port).await?;
    if command != CMD_CONNECT {
        return Err(Fail::Reply(COMMAND_NOT_SUPPORTED));
    }
    let port = u16::from_be_bytes(port);
    if port == 0 {
        return Err(Fail::Reply(GENERAL_FAILURE));
    }
    Ok(Dest {
        host,
        port,
        method: None,
        via: Via::Socks5,
    })
}

/// The reply code for a destination not reached.
fn code(refusal: &Refusal) -> u8 {
    use std::io::ErrorKind;
    match refusal {
        Refusal::Denied(_) => NOT_ALLOWED,
        Refusal::Unresolved(_) => HOST_UNREACHABLE,
        Refusal::Unreachable(kind, _) => match kind {
            ErrorKind::ConnectionRefused => CONNECTION_REFUSED,
            ErrorKind::NetworkUnreachable => NETWORK_UNREACHABLE,
            ErrorKind::HostUnreachable | ErrorKind::TimedOut => HOST_UNREACHABLE,
            _ => GENERAL_FAILURE,
        },
    }
}

/// `VER REP RSV ATYP BND.ADDR BND.PORT`; a failure names 0.0.0.0:0.
fn reply(code: u8, bound: Option<SocketAddr>) -> Vec<u8> {
    let mut out = vec![VERSION, code, 0];
    match bound {
        Some(SocketAddr::V6(a)) => {
            out.push(0x04);
            out.extend_from_slice(&a.ip().octets());
        }
        Some(SocketAddr::V4(a)) => {
            out.push(0x01);
            out.extend_from_slice(&a.ip().octets());
        }
        None => out.extend_from_slice(&[0x01, 0, 0, 0, 0]),
    }
    out.extend_from_slice(&bound.map_or(0, |a| a.port()).to_be_bytes());
    out
}

/// Answers a failure and closes.
async fn refuse(mut stream: TcpStream, code: u8) {
    if stream.write_all(&reply(code, None)).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}
