//! The HTTP endpoint's figures, on this machine, in one run (build the release binaries first):
//! `cargo build --release --workspace --bins && cargo bench -p cuba-exec --bench http`.
//!
//! 1. `run "echo hi"` over HTTP (one kept-alive connection, a session, raw HTTP/1.1) against
//!    the same call over stdio (raw JSON-RPC lines), 200 of each interleaved: medians and the
//!    difference (goal: at most +0.5 ms).
//! 2. Memory per idle session: the server's RSS before and after 1000 sessions are opened.
//! 3. `list_processes` per second with 100 sessions calling at once, each on its own
//!    connection, for 5 s.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{median, ms, Killed, Shim};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One kept-alive HTTP/1.1 connection with a session.
struct Conn {
    stream: BufReader<TcpStream>,
    addr: String,
    token: String,
    session: Option<String>,
    id: u64,
}

impl Conn {
    fn open(addr: &str, token: &str) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).unwrap();
        let mut c = Conn {
            stream: BufReader::new(stream),
            addr: addr.to_string(),
            token: token.to_string(),
            session: None,
            id: 1,
        };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}});
        let (headers, _) =
            c.post(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}));
        c.session = headers
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .map(|s| s.trim().to_string());
        assert!(c.session.is_some(), "no session: {headers}");
        c.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    /// A POST; the reply's head and body.
    fn post(&mut self, body: &Value) -> (String, String) {
        let body = body.to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n",
            self.addr, self.token
        );
        if let Some(s) = &self.session {
            head.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        self.stream.get_mut().write_all(head.as_bytes()).unwrap();
        self.read_reply()
    }

    fn read_reply(&mut self) -> (String, String) {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            assert!(
                self.stream.read_line(&mut line).unwrap() > 0,
                "connection closed"
            );
            if line == "\r\n" {
                break;
            }
            head.push_str(&line.to_ascii_lowercase());
        }
        let mut body = Vec::new();
        if let Some(n) = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
        {
            body.resize(n.trim().parse().unwrap(), 0);
            self.stream.read_exact(&mut body).unwrap();
        } else if head.contains("transfer-encoding: chunked") {
            loop {
                let mut size = String::new();
                self.stream.read_line(&mut size).unwrap();
                let n = usize::from_str_radix(size.trim(), 16).unwrap();
                let mut chunk = vec![0; n + 2];
                self.stream.read_exact(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        }
        (head, String::from_utf8_lossy(&body).into_owned())
    }

    fn call(&mut self, tool: &str, args: Value) -> String {
        self.id += 1;
        let (_, body) = self.post(
            &json!({"jsonrpc": "2.0", "id": self.id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}),
        );
        body
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let shim = PathBuf::from(env!("CARGO_BIN_EXE_cuba-exec"));
    let cubad = shim.with_file_name("cubad");
    let cubactl = shim.with_file_name("cubactl");
    assert!(
        cubad.exists() && cubactl.exists(),
        "build first: cargo build --release --workspace --bins"
    );
    let dir = tempfile::Builder::new()
        .prefix("cb")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let socket = dir.path().join("s");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[http]\nlisten = \"127.0.0.1:0\"\nmax_sessions_per_token = 5000\nmax_connections = 4096\n",
    )
    .unwrap();
    let env = [
        ("CUBA_EXEC_SOCKET", socket.clone()),
        ("CUBA_EXEC_STATE_DIR", dir.path().join("state")),
        ("CUBA_EXEC_CONFIG", config.clone()),
        ("CUBA_EXEC_TOKENS", dir.path().join("tokens.toml")),
    ];
    let _daemon = Killed(
        Command::new(&cubad)
            .args(["--socket"])
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let up = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(10),
            "cubad did not start"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let token = Command::new(&cubactl)
        .args(["token", "create", "bench"])
        .envs(env.iter().cloned())
        .output()
        .unwrap();
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    let server = Killed(
        Command::new(&shim)
            .args(["serve", "--http"])
            .envs(env.iter().cloned())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let status = dir.path().join("state/http.json");
    let addr = loop {
        let doc = std::fs::read_to_string(&status).ok();
        if let Some(Ok(doc)) = doc.map(|t| serde_json::from_str::<Value>(&t)) {
            break doc["url"]
                .as_str()
                .unwrap()
                .trim_start_matches("http://")
                .trim_end_matches("/mcp")
                .to_string();
        }
        assert!(
            up.elapsed() < Duration::from_secs(20),
            "the endpoint did not start"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let pid = server.0.id();

    // 1. run "echo hi", HTTP against stdio.
    let mut http = Conn::open(&addr, &token);
    let mut stdio = Shim::start(&shim, &socket);
    stdio.initialize();
    let run = json!({"command": "echo hi"});
    for _ in 0..20 {
        http.call("run", run.clone());
        stdio.request("tools/call", json!({"name": "run", "arguments": run}));
    }
    let (mut over_http, mut over_stdio) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        let t = Instant::now();
        let reply = http.call("run", run.clone());
        over_http.push(t.elapsed());
        assert!(reply.contains("hi"), "{reply}");
        let t = Instant::now();
        stdio.request("tools/call", json!({"name": "run", "arguments": run}));
        over_stdio.push(t.elapsed());
    }
    let (h, s) = (median(over_http), median(over_stdio));
    println!(
        "run \"echo hi\", median of 200: HTTP {:.2} ms, stdio {:.2} ms, difference {:+.2} ms (goal <= +0.5)",
        ms(h),
        ms(s),
        ms(h) - ms(s)
    );
    drop(stdio);
    // The table holds 440 finished records now; list_processes lists the newest.

    // 2. Memory per idle session.
    let before = rss_kib(pid);
    let mut idle = Vec::new();
    for _ in 0..1000 {
        let mut c = Conn::open(&addr, &token);
        // Only the session is kept: each connection is closed.
        idle.push(c.session.take());
    }
    std::thread::sleep(Duration::from_millis(200));
    let after = rss_kib(pid);
    println!(
        "1000 idle sessions: server RSS {before} KiB -> {after} KiB, {:.1} KiB per session",
        (after.saturating_sub(before)) as f64 / 1000.0
    );

    // 3. list_processes per second, 100 sessions at once.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..100)
        .map(|_| {
            let (addr, token, stop, done) =
                (addr.clone(), token.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut c = Conn::open(&addr, &token);
                while !stop.load(Ordering::Relaxed) {
                    let r = c.call("list_processes", json!({}));
                    assert!(r.contains("processes:"), "{r}");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let from = done.load(Ordering::Relaxed);
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let count = done.load(Ordering::Relaxed) - from;
    let secs = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    println!(
        "list_processes, 100 sessions at once: {:.0} requests/s ({count} in {secs:.1} s)",
        count as f64 / secs
    );
}
