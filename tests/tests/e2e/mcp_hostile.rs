//! The real `cuba-exec` against a client that writes what it should not: a truncated JSON
//! line, a line that is not UTF-8, ten megabytes of garbage, a line over the 16 MiB line limit,
//! requests too large for the daemon's 8 MiB frame. Each gets a JSON-RPC reply on stdout, and
//! the same server process goes on serving.

#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use cuba_protocol::wire::MAX_FRAME;
use cuba_tests::{bin, bounded, TestDaemon, STEP};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long a step with megabytes in it may take (a debug build on a busy 2-core machine).
const BIG_STEP: Duration = Duration::from_secs(90);

/// `cuba-exec` on pipes, served by one test's daemon. Dropping it SIGKILLs the server.
struct Shim {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Shim {
    /// Starts the server and completes the MCP handshake.
    async fn start(d: &TestDaemon) -> Shim {
        let mut cmd = Command::new(bin("cuba-exec"));
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CUBA_EXEC_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("CUBA_EXEC_SOCKET", d.socket())
            // Only the test's daemon may serve it: never start one of its own.
            .env("CUBA_EXEC_DAEMON", "/nonexistent/cubad")
            .env("CUBA_EXEC_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("cannot start cuba-exec");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut shim = Shim {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        let init = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "hostile", "version": "0" },
        });
        let reply = shim.request("initialize", init).await;
        assert_eq!(
            reply["result"]["serverInfo"]["name"], "cuba-exec",
            "{reply}"
        );
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        shim.send_line(initialized.to_string().as_bytes()).await;
        shim
    }

    /// Writes `bytes` and a newline.
    async fn send_line(&mut self, bytes: &[u8]) {
        bounded("write to cuba-exec", BIG_STEP, async {
            self.stdin.write_all(bytes).await.unwrap();
            self.stdin.write_all(b"\n").await.unwrap();
            self.stdin.flush().await.unwrap();
        })
        .await;
    }

    /// The next message the server writes that is not a request or notification of its own.
    async fn reply(&mut self, limit: Duration) -> Value {
        loop {
            let mut line = String::new();
            let n = bounded(
                "a line from cuba-exec",
                limit,
                self.stdout.read_line(&mut line),
            )
            .await
            .unwrap();
            assert!(n > 0, "cuba-exec closed its stdout");
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("cuba-exec wrote a line that is not JSON ({e}): {line}")
            });
            if message.get("method").is_none() {
                return message;
            }
        }
    }

    /// Sends request `method` and returns its reply (checked to be the reply to it).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.send_line(request.to_string().as_bytes()).await;
        let reply = self.reply(BIG_STEP).await;
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    /// `tools/call` of `tool`; returns the tool result.
    async fn call(&mut self, tool: &str, args: Value) -> Value {
        let reply = self
            .request("tools/call", json!({ "name": tool, "arguments": args }))
            .await;
        reply["result"].clone()
    }

    /// Writes `line` and expects a JSON-RPC error reply with a null id; returns the error.
    async fn refused(&mut self, line: &[u8]) -> Value {
        self.send_line(line).await;
        let reply = self.reply(BIG_STEP).await;
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        // JSON-RPC 2.0 §5: present, and null when the request's id could not be read.
        assert_eq!(reply.get("id"), Some(&Value::Null), "{reply}");
        assert!(reply.get("result").is_none(), "{reply}");
        reply["error"].clone()
    }

    /// `run` of `echo hi` works.
    async fn still_runs(&mut self) {
        let r = self.call("run", json!({ "command": "echo hi" })).await;
        let sc = &r["structuredContent"];
        assert_eq!(sc["exit_code"], 0, "{r}");
        assert_eq!(sc["output"], "hi\n", "{r}");
    }

    /// Ends input; the server must exit by itself, successfully.
    async fn finish(mut self) {
        drop(self.stdin);
        let status = bounded("cuba-exec exits at EOF", STEP, self.child.wait())
            .await
            .unwrap();
        assert!(status.success(), "{status}");
    }
}

/// Deterministic noise (xorshift) without a newline, so a failure reproduces.
fn garbage(len: usize) -> Vec<u8> {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            match (seed >> 24) as u8 {
                b'\n' => b' ',
                b => b,
            }
        })
        .collect()
}

/// A tool result that is a `BAD_REQUEST` naming the daemon's frame limit.
fn assert_too_large(r: &Value) {
    let sc = &r["structuredContent"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(sc["code"], "BAD_REQUEST", "{r}");
    let error = sc["error"].as_str().unwrap_or_default();
    let limit = format!("the limit is {} MiB", MAX_FRAME >> 20);
    assert!(error.contains(&limit), "{error}");
    assert!(error.contains("through a file"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_malformed_line_gets_an_error_reply_and_the_server_goes_on() {
    let d = TestDaemon::start().await;
    let mut shim = Shim::start(&d).await;
    shim.still_runs().await;

    let e = shim
        .refused(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ru"#)
        .await;
    assert_eq!(e["code"], -32700, "{e}");
    assert!(e["message"].as_str().unwrap().contains("not JSON"), "{e}");
    shim.still_runs().await;

    let e = shim.refused(b"{\"jsonrpc\":\"2.0\",\"id\":\xff\xfe}").await;
    assert_eq!(e["code"], -32700, "{e}");
    assert!(e["message"].as_str().unwrap().contains("UTF-8"), "{e}");
    shim.still_runs().await;

    let e = shim.refused(&garbage(10 * 1024 * 1024)).await;
    assert_eq!(e["code"], -32700, "{e}");
    shim.still_runs().await;

    // Over the line limit: refused without being read whole.
    let e = shim.refused(&garbage(17 * 1024 * 1024)).await;
    assert_eq!(e["code"], -32600, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("16 MiB (16 777 216 bytes)"), "{e}");
    shim.still_runs().await;

    // Valid, but too large for the daemon: the tool's own error, not the transport's.
    let stdin = "y".repeat(10 * 1024 * 1024);
    let r = shim
        .call(
            "run",
            json!({ "command": "cat >/dev/null", "stdin": stdin }),
        )
        .await;
    assert_too_large(&r);
    shim.still_runs().await;
    shim.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_frame_limit_is_a_bad_request_and_never_sent() {
    let d = TestDaemon::start().await;
    let mut shim = Shim::start(&d).await;
    let big = "y".repeat(10 * 1024 * 1024);

    let r = shim.call("run", json!({ "command": big })).await;
    assert_too_large(&r);
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("BAD_REQUEST: the request is "), "{text}");
    assert!(!text.contains("retry"), "{text}");
    let rows = shim.call("list_processes", json!({})).await;
    assert_eq!(rows["structuredContent"]["processes"], json!([]), "{rows}");

    // A large write to a running process's stdin: refused the same way, and the process
    // still takes input afterwards.
    let started = shim.call("start", json!({ "command": "cat" })).await;
    let id = started["structuredContent"]["id"].as_u64().unwrap();
    let r = shim
        .call("send_input", json!({ "id": id, "text": big }))
        .await;
    assert_too_large(&r);
    let r = shim
        .call(
            "send_input",
            json!({ "id": id, "text": "small\n", "eof": true }),
        )
        .await;
    assert!(r["structuredContent"]["code"].is_null(), "{r}");
    let r = shim
        .call("wait", json!({ "id": id, "timeout_ms": 15_000 }))
        .await;
    assert_eq!(r["structuredContent"]["wait"], "exited", "{r}");
    assert_eq!(r["structuredContent"]["output"], "small\n", "{r}");
    let rows = shim.call("list_processes", json!({})).await;
    let rows = rows["structuredContent"]["processes"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    shim.finish().await;
}
