//! HTTP replies as the endpoint's tests read them: a hand-written reader of heads, bodies by
//! `Content-Length` or chunks, and SSE, over a raw connection.

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::STEP;

/// One HTTP reply.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Lowercase names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body: the body itself, or the last `data:` line of an SSE
    /// stream that holds one.
    pub fn message(&self) -> Value {
        if let Ok(v) = serde_json::from_str(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .rfind(|v| v.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC reply in: {self:?}"))
    }

    /// The text of a tool call's reply.
    pub fn text(&self) -> String {
        let m = self.message();
        m["result"]["content"][0]["text"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| m.to_string())
    }
}

/// Writes one request on `stream` and reads the reply to the end of the connection.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {host}\r\n"));
    }
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream
        .write_all(head.as_bytes())
        .await
        .expect("cannot send");
    // A refused body may be cut off by the server's close: what was sent is enough.
    let _ = stream.write_all(body).await;
    read_reply(stream).await
}

/// A reply's head, read byte by byte (nothing after it).
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        let n = crate::bounded("a reply's head", STEP, stream.read(&mut byte))
            .await
            .expect("cannot read a reply");
        assert!(
            n == 1,
            "the connection closed mid-head: {:?}",
            String::from_utf8_lossy(&raw)
        );
        raw.push(byte[0]);
    }
    raw
}

/// A reply that has begun on `stream`: on 200 the stream, its body unread; else the reply.
pub(crate) async fn began(mut stream: TcpStream) -> Result<TcpStream, Reply> {
    let raw = read_head(&mut stream).await;
    match parse(&raw).status {
        200 => Ok(stream),
        _ => Err(body_of(&mut stream, raw).await),
    }
}

/// The reply whose head is `raw`, its body read by `Content-Length`.
async fn body_of<S: AsyncRead + Unpin>(stream: &mut S, mut raw: Vec<u8>) -> Reply {
    let head = parse(&raw);
    let length: usize = head
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream
        .read_exact(&mut body)
        .await
        .expect("cannot read a body");
    raw.extend_from_slice(&body);
    parse(&raw)
}

/// One reply on a kept-alive `stream` (its body by `Content-Length`).
pub async fn read_one<S: AsyncRead + Unpin>(stream: &mut S) -> Reply {
    let raw = read_head(stream).await;
    body_of(stream, raw).await
}

/// The reply on `stream`, read to the end of the connection.
pub async fn read_reply<S: AsyncRead + Unpin>(mut stream: S) -> Reply {
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    parse(&raw)
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP reply: {text:?}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = match chunked {
        true => dechunk(rest),
        false => rest.to_string(),
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(&rest[..n.min(rest.len())]);
            break;
        }
        out.push_str(&rest[..n]);
        text = rest[n..].trim_start_matches("\r\n");
    }
    out
}
