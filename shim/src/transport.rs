//! The MCP transport on stdin/stdout: one JSON-RPC message per line in, one writer out.
//!
//! rmcp's own line transport drops a line that is not JSON without a word (on purpose: see
//! modelcontextprotocol/rust-sdk#938) and drops a line over its length limit the same way, so a
//! client that sent one waits for a reply that never comes. This one answers every line it
//! cannot use — `-32700` for text that is not JSON (or not UTF-8), `-32600` for JSON that is not
//! a message and for a line over [`MAX_LINE`], with `"id": null` when the id cannot be known —
//! and keeps serving. Replying cannot start an echo storm: a peer that sends our reply back
//! sends a valid error message, which rmcp drops.
//!
//! Reading is bounded: a line is never buffered past [`MAX_LINE`]; the rest of a longer one is
//! skipped up to its newline. A line that fits in the read buffer is parsed where it lies.
//! Writing is one task that owns stdout and takes whole lines from a queue, so rmcp's messages
//! and the error replies never interleave, and a cancelled `receive` cannot leave half a line.

use std::io;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde::Serialize;
use serde_json::error::Category;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::limit;

/// Longest line (one message, without its newline) the server reads. Above the daemon's frame
/// limit, so a request too large for the daemon still arrives and gets a reply that says so.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// JSON-RPC 2.0: the text is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0: the JSON is not a valid request (here also: a line over [`MAX_LINE`]).
const INVALID_REQUEST: i64 = -32600;

/// Most messages fit, so most are parsed straight from the read buffer.
const READ_BUFFER: usize = 64 * 1024;
/// A line buffer grown past this is given back after use, not kept at its peak.
const KEEP_LINE: usize = 1024 * 1024;
/// Lines waiting for the writer. When the client stops reading, this fills and the server
/// stops reading too, instead of queueing without bound.
const QUEUE: usize = 64;
/// How long `close` waits for queued lines to reach a client that does not read them.
const CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

type Rx = RxJsonRpcMessage<RoleServer>;

/// What one line (or the end of input) gave.
#[derive(Debug)]
pub enum Read {
    Message(Box<Rx>),
    /// An error reply for the client, a whole line.
    Reply(Vec<u8>),
    /// Nothing to do: a blank line, or a malformed notification or response (those are never
    /// answered).
    Skip,
    /// The input ended or failed.
    End,
}

/// `reader` read as lines of at most `max` bytes.
pub struct Lines<R> {
    input: BufReader<R>,
    /// The start of a line longer than what the read buffer held.
    line: Vec<u8>,
    max: usize,
    /// Skipping the rest of a line that was already refused as too long.
    discarding: bool,
    ended: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub fn new(reader: R, max: usize) -> Lines<R> {
        Lines {
            input: BufReader::with_capacity(READ_BUFFER, reader),
            line: Vec::new(),
            max,
            discarding: false,
            ended: false,
        }
    }

    /// The next line's outcome. Cancel-safe: between a `fill_buf` and its `consume` nothing
    /// awaits, and a partial line stays in `self.line` for the next call.
    pub async fn next(&mut self) -> Read {
        loop {
            if self.ended {
                return Read::End;
            }
            let (used, read) = {
                let available = match self.input.fill_buf().await {
                    Ok(bytes) => bytes,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        tracing::warn!("cannot read stdin: {e}");
                        return Read::End;
                    }
                };
                if available.is_empty() {
                    self.ended = true;
                    // A last line without its newline is still a message.
                    if self.discarding || self.line.is_empty() {
                        return Read::End;
                    }
                    let read = decode(&self.line);
                    release(&mut self.line);
                    return read;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let body = newline.unwrap_or(available.len());
                let used = newline.map_or(body, |at| at + 1);
                let read = if self.discarding {
                    self.discarding = newline.is_none();
                    Read::Skip
                } else if self.line.len() + body > self.max {
                    release(&mut self.line);
                    self.discarding = newline.is_none();
                    too_long(self.max)
                } else if newline.is_none() {
                    self.line.extend_from_slice(available);
                    Read::Skip
                } else if self.line.is_empty() {
                    decode(&available[..body])
                } else {
                    self.line.extend_from_slice(&available[..body]);
                    let read = decode(&self.line);
                    release(&mut self.line);
                    read
                };
                (used, read)
            };
            self.input.consume(used);
            if !matches!(read, Read::Skip) {
                return read;
            }
        }
    }
}

/// Empties a line buffer; one that grew large is freed.
fn release(line: &mut Vec<u8>) {
    if line.capacity() > KEEP_LINE {
        *line = Vec::new();
    } else {
        line.clear();
    }
}

/// A `tools/call` request, the one on every command's path, read as what it is: the generic
/// message is untagged enums over flattened ones, each of which buffers the whole line and
/// tries its variants in turn (a tenth of this server's CPU on a `run`). Two direct reads of
/// the line instead; anything else, or anything these do not take, goes the generic way,
/// which also words the errors.
fn decode_call(line: &[u8]) -> Option<Rx> {
    use rmcp::model::{CallToolRequest, ClientRequest, JsonRpcRequest, JsonRpcVersion2_0};
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[allow(dead_code)]
        jsonrpc: JsonRpcVersion2_0,
        id: rmcp::model::RequestId,
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
    }
    let head: Head = serde_json::from_slice(line).ok()?;
    if head.method != "tools/call" {
        return None;
    }
    let call: CallToolRequest = serde_json::from_slice(line).ok()?;
    Some(Rx::Request(JsonRpcRequest::new(
        head.id,
        ClientRequest::CallToolRequest(call),
    )))
}

/// One line (without its newline) as a message, or the reply it needs.
pub fn decode(line: &[u8]) -> Read {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // RFC 8259 §8.1 lets a parser ignore a byte order mark.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Read::Skip;
    }
    if let Some(call) = decode_call(line) {
        return Read::Message(Box::new(call));
    }
    let e = match serde_json::from_slice::<Rx>(line) {
        Ok(message) => return Read::Message(Box::new(message)),
        Err(e) => e,
    };
    if matches!(e.classify(), Category::Syntax | Category::Eof) {
        let why = match std::str::from_utf8(line) {
            Err(bad) => format!("the line is not UTF-8 (byte {})", bad.valid_up_to()),
            Ok(_) => format!("the line is not JSON ({e})"),
        };
        tracing::debug!("parse error: {why}");
        return Read::Reply(error_line(
            Value::Null,
            PARSE_ERROR,
            format!("Parse error: {why}"),
        ));
    }
    // JSON, but not a message: answer a request, with its id when it has one; a notification
    // or a response must not be answered (JSON-RPC 2.0 §4.1, §5).
    let value: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
    let has = |key: &str| value.get(key).is_some();
    if (has("method") && !has("id")) || (!has("method") && (has("result") || has("error"))) {
        tracing::debug!("dropping a malformed notification or response: {e}");
        return Read::Skip;
    }
    let id = match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    tracing::debug!("invalid request: {e}");
    Read::Reply(error_line(
        id,
        INVALID_REQUEST,
        format!("Invalid request: {e}"),
    ))
}

fn too_long(max: usize) -> Read {
    tracing::warn!("discarding an incoming line longer than {max} bytes");
    Read::Reply(error_line(
        Value::Null,
        INVALID_REQUEST,
        format!(
            "Invalid request: the line is longer than {}, the limit for one message, and was \
             discarded: send large input through a file",
            limit(max)
        ),
    ))
}

/// A JSON-RPC error reply as a line. Not rmcp's error type: that leaves out a null id, which
/// JSON-RPC 2.0 requires (§5).
fn error_line(id: Value, code: i64, message: String) -> Vec<u8> {
    #[derive(Serialize)]
    struct Reply {
        jsonrpc: &'static str,
        id: Value,
        error: Error,
    }
    #[derive(Serialize)]
    struct Error {
        code: i64,
        message: String,
    }
    let reply = Reply {
        jsonrpc: "2.0",
        id,
        error: Error { code, message },
    };
    // Serialising strings and numbers cannot fail (were it to, a blank line goes out, which a
    // client skips).
    let mut line = serde_json::to_vec(&reply).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The server's transport: [`Lines`] from `reader`, lines to `writer` through one task.
pub struct LineTransport<R> {
    lines: Lines<R>,
    out: Option<mpsc::Sender<Vec<u8>>>,
    /// An error reply still to be queued (kept if `receive` is cancelled while waiting).
    pending: Option<Vec<u8>>,
    writer: Option<JoinHandle<()>>,
}

impl<R: AsyncRead + Unpin> LineTransport<R> {
    /// Must be called inside a Tokio runtime (it spawns the writer).
    pub fn new<W>(reader: R, writer: W) -> LineTransport<R>
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out, queue) = mpsc::channel(QUEUE);
        LineTransport {
            lines: Lines::new(reader, MAX_LINE),
            out: Some(out),
            pending: None,
            writer: Some(tokio::spawn(write_lines(writer, queue))),
        }
    }
}

/// Writes queued lines whole, flushing once the queue is empty.
async fn write_lines<W: AsyncWrite + Unpin>(writer: W, mut queue: mpsc::Receiver<Vec<u8>>) {
    let mut out = BufWriter::with_capacity(READ_BUFFER, writer);
    while let Some(line) = queue.recv().await {
        let mut written = out.write_all(&line).await;
        while written.is_ok() {
            match queue.try_recv() {
                Ok(line) => written = out.write_all(&line).await,
                Err(_) => break,
            }
        }
        if let Err(e) = written.and(out.flush().await) {
            // The client closed stdout: nothing more can reach it. Closing the queue makes
            // the next send fail, which ends the service.
            tracing::warn!("cannot write stdout: {e}");
            return;
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed")
}

/// The `_meta` key under which a listed tool carries its `execution` (SEP-2663's
/// `taskSupport`), which rmcp's `Tool` has no field for: the listing puts it there and
/// [`encode`] moves it to the tool's top level.
pub const EXECUTION_META: &str = "cuba-exec/execution";

/// A message as JSON. A tool listing's `execution`, parked in each tool's `_meta`, goes where
/// the extension reads it; every other message is written as rmcp has it.
fn encode(item: &TxJsonRpcMessage<RoleServer>) -> serde_json::Result<Vec<u8>> {
    use rmcp::model::{JsonRpcMessage, ServerResult};
    let listing = matches!(item, JsonRpcMessage::Response(r)
        if matches!(&r.result, ServerResult::ListToolsResult(l)
            if l.tools.iter().any(|t| t.meta.as_ref().is_some_and(|m| m.0.contains_key(EXECUTION_META)))));
    if !listing {
        return serde_json::to_vec(item);
    }
    let mut value = serde_json::to_value(item)?;
    if let Some(tools) = value
        .pointer_mut("/result/tools")
        .and_then(Value::as_array_mut)
    {
        for tool in tools {
            move_execution(tool);
        }
    }
    serde_json::to_vec(&value)
}

/// `tool._meta[EXECUTION_META]` to `tool.execution` (and `_meta` dropped if nothing is left).
fn move_execution(tool: &mut Value) {
    let Some(tool) = tool.as_object_mut() else {
        return;
    };
    let Some(meta) = tool.get_mut("_meta").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(execution) = meta.remove(EXECUTION_META) else {
        return;
    };
    if meta.is_empty() {
        tool.remove("_meta");
    }
    tool.insert("execution".into(), execution);
}

impl<R: AsyncRead + Unpin + Send> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), io::Error>> + Send + 'static {
        let out = self.out.clone();
        async move {
            // Encoded here, in rmcp's send task, not in the writer: large replies are encoded
            // side by side.
            let mut line = encode(&item)?;
            line.push(b'\n');
            let out = out.ok_or_else(closed)?;
            out.send(line).await.map_err(|_| closed())
        }
    }

    async fn receive(&mut self) -> Option<Rx> {
        loop {
            if self.pending.is_some() {
                // Reserve first: if this is cancelled, the reply is still pending.
                let permit = self.out.as_ref()?.reserve().await.ok()?;
                if let Some(line) = self.pending.take() {
                    permit.send(line);
                }
            }
            match self.lines.next().await {
                Read::Message(message) => return Some(*message),
                Read::Reply(line) => self.pending = Some(line),
                Read::Skip => {}
                Read::End => return None,
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        // rmcp has awaited every send by now: the queue holds the last replies. Dropping the
        // sender lets the writer finish them and stop.
        self.out = None;
        if let Some(writer) = self.writer.take() {
            if tokio::time::timeout(CLOSE_TIMEOUT, writer).await.is_err() {
                tracing::warn!("stdout is not being read; dropping the last replies");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;
    use tokio::io::AsyncWriteExt;

    use super::*;

    fn reply(read: Read) -> Value {
        match read {
            Read::Reply(line) => {
                assert_eq!(line.last(), Some(&b'\n'));
                serde_json::from_slice(&line).unwrap()
            }
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[test]
    fn each_kind_of_bad_line_gets_its_reply() {
        let r = reply(decode(br#"{"jsonrpc":"2.0","id":1,"method":"tools/ca"#));
        assert_eq!(r["error"]["code"], -32700);
        assert_eq!(r["id"], Value::Null);
        assert!(r.as_object().unwrap().contains_key("id"));
        assert!(r["error"]["message"].as_str().unwrap().contains("not JSON"));

        let r = reply(decode(b"\xff\xfe{}"));
        assert_eq!(r["error"]["code"], -32700);
        assert!(r["error"]["message"].as_str().unwrap().contains("UTF-8"));

        // JSON that is no message: answered with the request's id.
        let r = reply(decode(br#"{"jsonrpc":"2.0","id":"x7"}"#));
        assert_eq!(r["error"]["code"], -32600);
        assert_eq!(r["id"], "x7");
        let r = reply(decode(b"[1,2]"));
        assert_eq!(
            (r["error"]["code"].clone(), r["id"].clone()),
            (json!(-32600), Value::Null)
        );
    }

    /// The direct read of a `tools/call` gives the message the generic one does, its
    /// `_meta` (the progress token) included, and leaves every other line to it.
    #[test]
    fn a_tool_call_is_read_directly_and_as_the_generic_read_would() {
        let lines: [&[u8]; 3] = [
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":{"command":"echo hi"}}}"#,
            br#"{"method":"tools/call","params":{"_meta":{"progressToken":"p1"},"name":"wait","arguments":{"id":3}},"id":"s","jsonrpc":"2.0"}"#,
            br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"run","arguments":{"command":"\u00e9\n"}}}"#,
        ];
        for line in lines {
            let direct = decode_call(line).unwrap();
            let generic: Rx = serde_json::from_slice(line).unwrap();
            assert_eq!(
                serde_json::to_value(&direct).unwrap(),
                serde_json::to_value(&generic).unwrap()
            );
            let Rx::Request(r) = direct else {
                panic!("not a request")
            };
            let rmcp::model::ClientRequest::CallToolRequest(call) = r.request else {
                panic!("not a tool call")
            };
            if line.windows(2).any(|w| w == b"p1") {
                let meta = call.extensions.get::<rmcp::model::RequestMetaObject>();
                assert!(meta.and_then(|m| m.get_progress_token()).is_some());
            }
        }
        for other in [
            &br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#[..],
            br#"{"jsonrpc":"1.0","id":3,"method":"tools/call","params":{"name":"run"}}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"run"}}"#,
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#,
        ] {
            assert!(decode_call(other).is_none());
        }
    }

    #[test]
    fn messages_blank_lines_and_unanswerable_ones() {
        let ping = br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
        assert!(matches!(decode(ping), Read::Message(_)));
        let mut dressed = b"\xEF\xBB\xBF".to_vec();
        dressed.extend_from_slice(ping);
        dressed.push(b'\r');
        assert!(matches!(decode(&dressed), Read::Message(_)));
        assert!(matches!(decode(b"  \r"), Read::Skip));
        // A malformed notification or response gets no answer.
        assert!(matches!(
            decode(br#"{"jsonrpc":"1.0","method":"x"}"#),
            Read::Skip
        ));
        assert!(matches!(
            decode(br#"{"jsonrpc":"1.0","id":1,"result":{}}"#),
            Read::Skip
        ));
    }

    #[tokio::test]
    async fn a_long_line_is_refused_without_being_kept_and_reading_goes_on() {
        let (mut tx, rx) = tokio::io::duplex(1 << 12);
        let mut lines = Lines::new(rx, 100);
        tokio::spawn(async move {
            tx.write_all(&[b'x'; 10_000]).await.unwrap();
            tx.write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
                .await
                .unwrap();
            // A last line without a newline, then the end.
            tx.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}")
                .await
                .unwrap();
        });
        let r = reply(lines.next().await);
        assert_eq!(r["error"]["code"], -32600);
        assert!(lines.line.is_empty());
        assert!(matches!(lines.next().await, Read::Message(_)));
        assert!(matches!(lines.next().await, Read::Message(_)));
        assert!(matches!(lines.next().await, Read::End));
    }

    #[tokio::test]
    async fn a_line_split_across_reads_is_one_message() {
        let (mut tx, rx) = tokio::io::duplex(8);
        let mut lines = Lines::new(rx, MAX_LINE);
        tokio::spawn(async move {
            tx.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
                .await
                .unwrap();
        });
        assert!(matches!(lines.next().await, Read::Message(_)));
        assert!(matches!(lines.next().await, Read::End));
    }
}
