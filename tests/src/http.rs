//! The real `cuba-exec serve --http` for one test, on an ephemeral loopback port, with its own
//! config and tokens file beside a [`TestDaemon`]; and a plain HTTP/1.1 client written by hand,
//! so the tests can send what a real client never would (no token, a forged Host, a 10 MB
//! body, headers a byte a second). Dropping the [`HttpServer`] SIGKILLs it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::http_reply::began;
pub use crate::http_reply::{exchange, read_one, read_reply, Reply};
use crate::{bin, TestDaemon, STEP};

/// The era of the raw requests: sessions (`initialize`, `Mcp-Session-Id`).
pub const LEGACY: &str = "2025-06-18";

pub struct HttpServer {
    child: Child,
    pub addr: String,
    pub config: PathBuf,
    tokens: PathBuf,
    socket: PathBuf,
    state: PathBuf,
    log: PathBuf,
}

impl HttpServer {
    /// Serves `d`'s daemon with `[http]` keys `http` (TOML lines) and other config lines `rest`.
    pub async fn start(d: &TestDaemon, http: &str, rest: &str) -> HttpServer {
        HttpServer::start_logging(d, http, rest, Some("warn")).await
    }

    /// As [`HttpServer::start`], its log filter `CUBA_EXEC_LOG` = `filter` (`None`: its default).
    pub async fn start_logging(
        d: &TestDaemon,
        http: &str,
        rest: &str,
        filter: Option<&str>,
    ) -> HttpServer {
        let dir = d.dir();
        let config = dir.join("http-config.toml");
        std::fs::write(
            &config,
            format!("{rest}\n[http]\nlisten = \"127.0.0.1:0\"\n{http}\n"),
        )
        .expect("cannot write the config");
        let state = dir.join("http-state");
        let log = dir.join("http.log");
        let mut server = HttpServer {
            child: Command::new("true").spawn().expect("cannot run true"),
            addr: String::new(),
            config,
            tokens: dir.join("tokens.toml"),
            socket: d.socket().to_path_buf(),
            state,
            log,
        };
        let logfile = std::fs::File::create(&server.log).expect("cannot create the log");
        let mut cmd = server.command(&bin("cuba-exec"));
        match filter {
            Some(f) => cmd.env("CUBA_EXEC_LOG", f),
            None => cmd.env_remove("CUBA_EXEC_LOG"),
        };
        cmd.args(["serve", "--http"])
            .stdout(Stdio::null())
            .stderr(logfile)
            .kill_on_drop(true);
        server.child = cmd.spawn().expect("cannot start cuba-exec serve --http");
        server.addr = server.wait_serving().await;
        server
    }

    /// A command with this server's environment (config, tokens, socket; never a daemon of its
    /// own).
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CUBA_EXEC_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("CUBA_EXEC_SOCKET", &self.socket)
            .env("CUBA_EXEC_STATE_DIR", &self.state)
            .env("CUBA_EXEC_CONFIG", &self.config)
            .env("CUBA_EXEC_TOKENS", &self.tokens)
            .env("CUBA_EXEC_DAEMON", "/nonexistent/cubad")
            .env("CUBA_EXEC_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// Its address from `http.json`, once it serves.
    async fn wait_serving(&mut self) -> String {
        let deadline = Instant::now() + STEP;
        loop {
            if let Ok(text) = std::fs::read_to_string(self.state.join("http.json")) {
                if let Ok(doc) = serde_json::from_str::<Value>(&text) {
                    let url = doc["url"].as_str().unwrap_or_default();
                    let addr = url
                        .trim_start_matches("http://")
                        .trim_start_matches("https://")
                        .trim_end_matches("/mcp");
                    return addr.to_string();
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("cuba-exec serve --http ended with {status}: {}", self.log());
            }
            assert!(Instant::now() < deadline, "not serving: {}", self.log());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn tokens_file(&self) -> &Path {
        &self.tokens
    }

    /// Its state directory (where its `http.json` is).
    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    /// `cubactl token ARGS`' stdout, which must succeed.
    pub async fn token(&self, args: &[&str]) -> String {
        let out = crate::bounded(
            "cubactl token",
            STEP,
            self.command(&bin("cubactl"))
                .arg("token")
                .args(args)
                .output(),
        )
        .await
        .expect("cannot run cubactl");
        assert!(
            out.status.success(),
            "cubactl token {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// One request on a new connection (`Connection: close`), read to its end.
    pub async fn request(&self, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let stream = TcpStream::connect(&self.addr)
            .await
            .expect("cannot connect");
        exchange(stream, &self.addr, method, "/mcp", headers, body).await
    }

    /// A GET of `path`.
    pub async fn get(&self, path: &str) -> Reply {
        let stream = TcpStream::connect(&self.addr)
            .await
            .expect("cannot connect");
        exchange(stream, &self.addr, "GET", path, &[], b"").await
    }

    /// A JSON-RPC request with `token` (and `session`, when one is open).
    pub async fn rpc(
        &self,
        token: &str,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Reply {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", LEGACY),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        // Ids unique within a session (and across sessions, which costs nothing).
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.request("POST", &headers, body.to_string().as_bytes())
            .await
    }

    /// A new session of `token` (initialize, then initialized): its id.
    pub async fn session(&self, token: &str) -> String {
        let init = json!({
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "raw-http", "version": "0"},
        });
        let reply = self.rpc(token, None, "initialize", init).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        let id = reply
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("no session id: {reply:?}"))
            .to_string();
        let auth = format!("Bearer {token}");
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = self
            .request(
                "POST",
                &[
                    ("Authorization", &auth),
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                    ("MCP-Protocol-Version", LEGACY),
                    ("Mcp-Session-Id", &id),
                ],
                note.to_string().as_bytes(),
            )
            .await;
        assert_eq!(r.status, 202, "{r:?}");
        id
    }

    /// A tool call in `session` whose reply has begun (its status line read, `200` checked)
    /// and is left unread on the returned connection: a call in flight, until dropped.
    pub async fn begin_call(
        &self,
        token: &str,
        session: &str,
        tool: &str,
        args: Value,
    ) -> TcpStream {
        match self.begin(token, session, tool, args).await {
            Ok(stream) => stream,
            Err(reply) => panic!("the call did not begin: {reply:?}"),
        }
    }

    /// A POST of `body` as it is (escapes, batches) with `token`, and `session` when given.
    pub async fn post(&self, token: &str, session: Option<&str>, body: &str) -> Reply {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", LEGACY),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        self.request("POST", &headers, body.as_bytes()).await
    }

    /// Request text `raw` (head and body, as written) on a new connection; the reply read to
    /// the end of the connection.
    pub async fn raw(&self, raw: &str) -> Reply {
        let mut stream = TcpStream::connect(&self.addr)
            .await
            .expect("cannot connect");
        stream.write_all(raw.as_bytes()).await.expect("cannot send");
        read_reply(stream).await
    }

    /// A tool call in `session` whose reply has begun: on 200 the connection with its head
    /// read and its body left unread (a call in flight, until dropped); else the reply.
    pub async fn begin(
        &self,
        token: &str,
        session: &str,
        tool: &str,
        args: Value,
    ) -> Result<TcpStream, Reply> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 40);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}})
        .to_string();
        let mut stream = TcpStream::connect(&self.addr)
            .await
            .expect("cannot connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: {LEGACY}\r\nMcp-Session-Id: {session}\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .await
            .expect("cannot send");
        began(stream).await
    }

    /// `session`'s standalone stream (GET) whose reply has begun: on 200 the connection with
    /// its head read and the stream left unread; else the reply.
    pub async fn stream(&self, token: &str, session: &str) -> Result<TcpStream, Reply> {
        let mut stream = TcpStream::connect(&self.addr)
            .await
            .expect("cannot connect");
        let head = format!(
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
             Accept: text/event-stream\r\nMCP-Protocol-Version: {LEGACY}\r\n\
             Mcp-Session-Id: {session}\r\n\r\n",
            self.addr
        );
        stream
            .write_all(head.as_bytes())
            .await
            .expect("cannot send");
        began(stream).await
    }

    /// A tool call in `session`.
    pub async fn call(&self, token: &str, session: &str, tool: &str, args: Value) -> Reply {
        self.rpc(
            token,
            Some(session),
            "tools/call",
            json!({"name": tool, "arguments": args}),
        )
        .await
    }
}
