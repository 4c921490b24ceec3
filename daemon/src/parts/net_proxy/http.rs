//! The HTTP side of the proxy: a CONNECT tunnel, or one plain absolute-form request, per client
//! connection.
//!
//! A plain request is forwarded once — its head rewritten to origin-form with `Connection:
//! close`, then exactly `Content-Length` bytes of body — and nothing the client sends after it
//! reaches the upstream: a second, pipelined request would otherwise pass unchecked (a POST
//! behind a GET to a read-only host). A body without a length (`Transfer-Encoding`) is refused
//! for the same reason: where it ends is what a smuggled request hides behind.

use std::fmt::Write as _;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout, timeout_at, Instant};

use super::rules::{normalise, parse_port, split_host_port};
use super::{open, Dest, Gate, Refusal, Via};

/// The request head, request line to blank line.
const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 100;
/// Hop-by-hop headers, never forwarded; `Host` is rewritten from the request target.
const DROPPED: [&str; 5] = [
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
    "host",
];

/// An answer the proxy gives itself, after which it closes.
struct Reply {
    status: u16,
    body: String,
    /// The `X-Cuba-Exec` header: `denied` or `failed`.
    tag: Option<&'static str>,
}

fn bad(why: &str) -> Reply {
    Reply {
        status: 400,
        body: format!("cuba-exec: bad request: {why}"),
        tag: None,
    }
}

fn too_large(why: &str) -> Reply {
    Reply {
        status: 431,
        body: format!("cuba-exec: {why}"),
        tag: None,
    }
}

fn refused(dest: &Dest, refusal: &Refusal) -> Reply {
    match refusal {
        Refusal::Denied(why) => Reply {
            status: 403,
            body: format!("cuba-exec: {dest} refused: {why}"),
            tag: Some("denied"),
        },
        Refusal::Unresolved(why) | Refusal::Unreachable(_, why) => Reply {
            status: 502,
            body: format!("cuba-exec: {dest} failed: {why}"),
            tag: Some("failed"),
        },
    }
}

/// A request head: the request line's three parts and the header lines, trimmed.
struct Head<'a> {
    method: &'a str,
    target: &'a str,
    version: &'a str,
    headers: Vec<(&'a str, &'a str)>,
}

pub(super) async fn serve(
    mut stream: TcpStream,
    gate: &dyn Gate,
    deadline: Instant,
    limit: Duration,
) {
    let mut buf = vec![0u8; MAX_HEAD];
    let (filled, end) = match timeout_at(deadline, read_head(&mut stream, &mut buf)).await {
        Ok(Read::Head { filled, end }) => (filled, end),
        Ok(Read::TooLarge) => return finish(stream, too_large("request head over 16 KiB")).await,
        // Gone, or too slow: dropped without a word.
        Ok(Read::Gone) | Err(_) => return,
    };
    let head = match parse(&buf[..end]) {
        Ok(head) => head,
        Err(reply) => return finish(stream, reply).await,
    };
    let early = &buf[end..filled];
    if head.method == "CONNECT" {
        let (host, port) = match authority(head.target, None) {
            Ok(hp) => hp,
            Err(reply) => return finish(stream, reply).await,
        };
        let dest = Dest {
            host,
            port,
            method: None,
            via: Via::Connect,
        };
        tunnel(stream, gate, &dest, early, limit).await;
    } else {
        forward(stream, gate, &head, early, limit).await;
    }
}

enum Read {
    /// `end`: just past the blank line; `filled`: bytes read (what follows `end` came early).
    Head {
        filled: usize,
        end: usize,
    },
    TooLarge,
    Gone,
}

async fn read_head(stream: &mut TcpStream, buf: &mut [u8]) -> Read {
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            return Read::TooLarge;
        }
        match stream.read(&mut buf[filled..]).await {
            Ok(0) | Err(_) => return Read::Gone,
            Ok(n) => {
                let from = filled.saturating_sub(3);
                filled += n;
                if let Some(end) = head_end(&buf[..filled], from) {
                    return Read::Head { filled, end };
                }
            }
        }
    }
}

/// Just past the first blank line (`\n\n` or `\n\r\n`) whose first newline is at `from` or later.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(p) = buf.get(at..)?.iter().position(|&b| b == b'\n') {
        let after = &buf[at + p + 1..];
        if after.starts_with(b"\n") {
            return Some(at + p + 2);
        }
        if after.starts_with(b"\r\n") {
            return Some(at + p + 3);
        }
        at += p + 1;
    }
    None
}

fn parse(head: &[u8]) -> Result<Head<'_>, Reply> {
    if head.contains(&0) {
        return Err(bad("NUL byte in the request head"));
    }
    let text = std::str::from_utf8(head).map_err(|_| bad("the request head is not UTF-8"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("the request line is not METHOD TARGET VERSION"));
    };
    if !is_token(method) || target.is_empty() || has_control(target) {
        return Err(bad("bad request line"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(bad("only HTTP/1.0 and HTTP/1.1"));
    }
    let mut headers = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        if headers.len() == MAX_HEADERS {
            return Err(too_large("more than 100 header lines"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad("a header line without `:`"));
        };
        let value = value.trim_matches([' ', '\t']);
        // A folded line starts with white space, which no token holds; a stray CR in a value
        // would end the line early for the upstream.
        if !is_token(name) || has_control(value) {
            return Err(bad("bad header line"));
        }
        headers.push((name, value));
    }
    Ok(Head {
        method,
        target,
        version,
        headers,
    })
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_control() && c != '\t')
}

/// `host:port` (the port required unless `default` is given), host in normal form.
fn authority(s: &str, default: Option<u16>) -> Result<(String, u16), Reply> {
    if s.contains('@') {
        return Err(bad("user info in the address"));
    }
    let (host, port) = split_host_port(s).map_err(bad)?;
    let port = match (port, default) {
        (Some(p), _) => parse_port(p).map_err(bad)?,
        (None, Some(p)) => p,
        (None, None) => return Err(bad("CONNECT needs host:port")),
    };
    Ok((normalise(host).map_err(bad)?, port))
}

/// A CONNECT: open, answer 200, send what came early, then relay both ways.
async fn tunnel(
    mut stream: TcpStream,
    gate: &dyn Gate,
    dest: &Dest,
    early: &[u8],
    limit: Duration,
) {
    let mut upstream = match open(gate, dest, limit).await {
        Ok(up) => up,
        Err(refusal) => return finish(stream, refused(dest, &refusal)).await,
    };
    let ok = b"HTTP/1.1 200 Connection established\r\n\r\n";
    if stream.write_all(ok).await.is_err() || upstream.write_all(early).await.is_err() {
        return;
    }
    let _ = super::relay(&mut stream, &mut upstream).await;
}

/// A plain request: one, forwarded in origin-form; then the response, until upstream closes.
async fn forward(
    mut stream: TcpStream,
    gate: &dyn Gate,
    head: &Head<'_>,
    early: &[u8],
    limit: Duration,
) {
    let is_http = |t: &str| {
        t.get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("http://"))
    };
    let Some(rest) = head.target.get(7..).filter(|_| is_http(head.target)) else {
        let why = match head.target.starts_with('/') || head.target == "*" {
            true => "a proxy takes absolute-form targets only (GET http://host/path)",
            false => "only http:// targets (https goes through CONNECT)",
        };
        return finish(stream, bad(why)).await;
    };
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(split);
    let (host, port) = match authority(auth, Some(80)) {
        Ok(hp) => hp,
        Err(reply) => return finish(stream, reply).await,
    };
    let length = match body_length(&head.headers) {
        Ok(length) => length,
        Err(reply) => return finish(stream, reply).await,
    };
    let dest = Dest {
        host,
        port,
        method: Some(head.method.to_string()),
        via: Via::Http,
    };
    let Some(length) = length else {
        gate.audit(
            &dest,
            "denied: a request body without Content-Length is not forwarded",
            None,
        );
        let body = "cuba-exec: a request body must have a Content-Length: \
                    Transfer-Encoding is not forwarded";
        return finish(
            stream,
            Reply {
                status: 411,
                body: body.to_string(),
                tag: Some("denied"),
            },
        )
        .await;
    };
    let mut upstream = match open(gate, &dest, limit).await {
        Ok(up) => up,
        Err(refusal) => return finish(stream, refused(&dest, &refusal)).await,
    };
    let out = request_head(head, &dest, path);
    let first = early
        .len()
        .min(usize::try_from(length).unwrap_or(usize::MAX));
    if upstream.write_all(out.as_bytes()).await.is_err()
        || upstream.write_all(&early[..first]).await.is_err()
    {
        return;
    }
    let rest = length - first as u64;
    let (mut client_in, mut client_out) = stream.split();
    let (mut upstream_in, mut upstream_out) = upstream.split();
    // The body goes up while the response comes down: an upstream may answer before the body
    // (`100 Continue`, an early 413).
    let send = async {
        match tokio::io::copy(&mut (&mut client_in).take(rest), &mut upstream_out).await {
            // The client went before its body was sent: the request is abandoned.
            Ok(n) if n < rest => return,
            // Sent; or the upstream stopped reading, and its answer is what follows.
            _ => {}
        }
        // Whatever the client sends after the body is read and dropped; a reset ends all.
        let mut sink = [0u8; 1024];
        loop {
            match client_in.read(&mut sink).await {
                Ok(0) => std::future::pending::<()>().await,
                Ok(_) => {}
                Err(_) => return,
            }
        }
    };
    tokio::select! {
        _ = super::copy_down(&mut upstream_in, &mut client_out) => {}
        () = send => {}
    }
    let _ = client_out.shutdown().await;
}

/// `Some(n)`: exactly n bytes of body (0 when there is none); `None`: a Transfer-Encoding body.
fn body_length(headers: &[(&str, &str)]) -> Result<Option<u64>, Reply> {
    if headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
    {
        return Ok(None);
    }
    let mut length = None;
    for (_, v) in headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        let ok = !v.is_empty() && v.len() <= 18 && v.bytes().all(|b| b.is_ascii_digit());
        let n: u64 = v
            .parse()
            .ok()
            .filter(|_| ok)
            .ok_or_else(|| bad("bad Content-Length"))?;
        if length.is_some_and(|l| l != n) {
            return Err(bad("two different Content-Length headers"));
        }
        length = Some(n);
    }
    Ok(Some(length.unwrap_or(0)))
}

/// The head sent upstream: origin-form, `Host` from the target, no hop-by-hop headers (nor
/// those the client's `Connection` names), and `Connection: close`.
fn request_head(head: &Head<'_>, dest: &Dest, path: &str) -> String {
    let named: Vec<&str> = head
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(',').map(str::trim))
        .collect();
    let drop = |n: &str| {
        DROPPED
            .iter()
            .chain(&named)
            .any(|d| n.eq_ignore_ascii_case(d))
    };
    let mut out = String::with_capacity(MAX_HEAD);
    let slash = if path.starts_with('/') { "" } else { "/" };
    let _ = write!(out, "{} {slash}{path} {}\r\n", head.method, head.version);
    let _ = match dest.port {
        80 if dest.host.contains(':') => write!(out, "Host: [{}]\r\n", dest.host),
        80 => write!(out, "Host: {}\r\n", dest.host),
        _ => write!(out, "Host: {dest}\r\n"),
    };
    for (n, v) in head.headers.iter().filter(|(n, _)| !drop(n)) {
        let _ = write!(out, "{n}: {v}\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// Writes `reply` and closes, reading for a moment what the client still sends: closing with
/// unread bytes resets the connection, which can destroy the reply before it is read.
async fn finish(mut stream: TcpStream, reply: Reply) {
    let reason = match reply.status {
        400 => "Bad Request",
        403 => "Forbidden",
        411 => "Length Required",
        431 => "Request Header Fields Too Large",
        _ => "Bad Gateway",
    };
    let body: String = reply
        .body
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        reply.status,
        body.len() + 1
    );
    if let Some(tag) = reply.tag {
        let _ = write!(out, "X-Cuba-Exec: {tag}\r\n");
    }
    let _ = write!(out, "\r\n{body}\n");
    if stream.write_all(out.as_bytes()).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let mut left = 256 * 1024usize;
    let _ = timeout(Duration::from_secs(1), async {
        while let Ok(n @ 1..) = stream.read(&mut sink).await {
            left = left.saturating_sub(n);
            if left == 0 {
                break;
            }
        }
    })
    .await;
}
