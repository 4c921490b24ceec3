//! `network = "proxy"` end to end: a command's tree has no route out but the daemon's proxy,
//! which lets it reach the hosts its rules allow (HTTP CONNECT, plain HTTP, SOCKS5), refuses
//! the rest with the reason, keeps read-only hosts to GET, never reaches the daemon's own
//! loopback through a wildcard, asks the person about an unknown host (remembered like other
//! approvals), and writes an audit line per connection. Names come from a hosts file of the
//! daemon's own mount namespace, all on 127.0.0.1.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::{
    AskKind, ProcessInfo, SpawnRequest, WaitReason, WaitRequest, WaitResult, WaitSpec,
};
use cuba_tests::{run_in, spawn_req, spawn_with, text, wait_exit, Step, TestDaemon};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback HTTP server answering every request `200 hello from PATH`, its request lines
/// kept; it runs until dropped.
struct Origin {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Origin {
    async fn start() -> Origin {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&got).into_owned();
                    let line = head.lines().next().unwrap_or_default().to_string();
                    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                    kept.lock().unwrap().push(line);
                    let body = format!("hello from {path}\n");
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                });
            }
        });
        Origin { port, seen, task }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A hosts file naming `names` as 127.0.0.1, in `dir`.
fn hosts(dir: &Path, names: &[&str]) -> std::path::PathBuf {
    let file = dir.join("hosts");
    let mut text = String::from("127.0.0.1 localhost\n");
    for n in names {
        text.push_str(&format!("127.0.0.1 {n}\n"));
    }
    std::fs::write(&file, text).unwrap();
    file
}

async fn proxied(dir: &Path, rules: &[(&str, &str)]) -> TestDaemon {
    let names = [
        "allowed.test",
        "denied.test",
        "ro.test",
        "asked.test",
        "other.test",
    ];
    let mut b = TestDaemon::builder()
        .env("CUBA_EXEC_NETWORK", "proxy")
        .hosts_file(&hosts(dir, &names));
    for (k, v) in rules {
        b = b.env(k, v);
    }
    b.start().await
}

/// Starts `command` in `cwd` and waits until it is held for a person's answer.
async fn held(c: &Client, command: &str, cwd: &Path) -> (ProcessInfo, WaitResult) {
    let req = SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..spawn_req(command)
    };
    let p = spawn_with(c, req).await;
    let w = c
        .wait(WaitRequest {
            id: p.id,
            since: None,
            spec: WaitSpec::exit(20_000, 0),
        })
        .step()
        .await
        .unwrap();
    assert_eq!(w.reason, WaitReason::AwaitingApproval, "{w:?}");
    (p, w)
}

fn net_lines(d: &TestDaemon) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["event"] == "net")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rules_decide_each_connection_and_there_is_no_other_way_out() {
    let origin = Origin::start().await;
    let port = origin.port;
    let dir = tempfile::tempdir().unwrap();
    let allow = format!("allowed.test:{port}");
    let d = proxied(
        dir.path(),
        &[
            ("CUBA_EXEC_PROXY_ALLOW", &allow),
            ("CUBA_EXEC_PROXY_READ_ONLY", "ro.test"),
            ("CUBA_EXEC_PROXY_DENY", "ro.test:1,denied.test"),
        ],
    )
    .await;
    let c = d.client().await;
    let cwd = dir.path();
    // Plain HTTP through HTTP_PROXY, CONNECT (a tunnel), and SOCKS5 with the name resolved by
    // the daemon: the allowed host is reached all three ways.
    let cmd = format!(
        "curl -sS http://allowed.test:{port}/plain && \
         curl -sS -p http://allowed.test:{port}/tunnel && \
         curl -sS -x socks5h://127.0.0.1:3128 http://allowed.test:{port}/socks"
    );
    let (code, out) = run_in(&c, &cmd, cwd).await;
    assert_eq!(code, Some(0), "{out}");
    for path in ["/plain", "/tunnel", "/socks"] {
        assert!(out.contains(&format!("hello from {path}")), "{path}: {out}");
    }
    // A denied host: refused with the reason, and the origin never saw it.
    let cmd = format!("curl -sS -w ' %{{http_code}}' http://denied.test:{port}/no; curl -sS http://denied.test:{port}/again");
    let req = SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..spawn_req(&cmd)
    };
    let p = spawn_with(&c, req).await;
    let done = wait_exit(&c, p.id).await;
    let out = text(&done.output.bytes());
    assert!(out.contains("403") && out.contains("refused"), "{out}");
    // The row says so too, once per destination, for a tool that hides the proxy's answer.
    let lines = done.process.blocked_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!(
            "BLOCKED: a connection to denied.test:{port} (HTTP GET), rule proxy: "
        )),
        "{lines:?}"
    );
    // The same host on a port no rule allows, and a host no rule names (unknown = deny).
    let cmd = format!(
        "curl -sS -p http://allowed.test:{}/ 2>&1",
        port.wrapping_add(1)
    );
    let (code, _) = run_in(&c, &cmd, cwd).await;
    assert_ne!(code, Some(0));
    let cmd = format!("curl -sS -p http://other.test:{port}/ 2>&1");
    let (code, out) = run_in(&c, &cmd, cwd).await;
    assert_ne!(code, Some(0), "{out}");
    // Read-only: GET passes, POST does not, and a tunnel (whose method cannot be seen) does not.
    let cmd = format!(
        "curl -sS http://ro.test:{port}/get; curl -sS -w ' %{{http_code}}' -d x http://ro.test:{port}/post; \
         curl -sS -p http://ro.test:{port}/tunnel 2>&1"
    );
    let (_, out) = run_in(&c, &cmd, cwd).await;
    assert!(out.contains("hello from /get"), "{out}");
    assert!(
        !out.contains("hello from /post") && !out.contains("hello from /tunnel"),
        "{out}"
    );
    // No way around the proxy: straight to the origin's address, or by bash's /dev/tcp.
    let cmd = format!(
        "curl -sS --noproxy '*' http://127.0.0.1:{port}/direct 2>&1; \
         bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected' 2>&1"
    );
    let (_, out) = run_in(&c, &cmd, cwd).await;
    assert!(
        !out.contains("hello from /direct") && !out.contains("connected"),
        "{out}"
    );
    let seen = origin.seen();
    assert!(!seen
        .iter()
        .any(|l| l.contains("/no") || l.contains("/post") || l.contains("/direct")));
    // One audit line per connection, with the decision and the destination.
    let lines = net_lines(&d);
    let dest = |l: &serde_json::Value| l["dest"].as_str().unwrap_or_default().to_string();
    assert!(
        lines
            .iter()
            .any(|l| l["decision"] == "allowed" && dest(l) == format!("allowed.test:{port}")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["decision"] == "denied" && dest(l) == format!("denied.test:{port}")),
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .all(|l| l["id"].as_u64().is_some() && l["program"].is_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_never_reaches_loopback_and_no_network_wins_over_the_proxy() {
    let origin = Origin::start().await;
    let port = origin.port;
    let dir = tempfile::tempdir().unwrap();
    let d = proxied(dir.path(), &[("CUBA_EXEC_PROXY_ALLOW", "*")]).await;
    let c = d.client().await;
    // other.test is 127.0.0.1 here: `*` allows the name, the loopback guard refuses it.
    let cmd = format!("curl -sS -w ' %{{http_code}}' http://other.test:{port}/x; curl -sS -p http://127.0.0.1:{port}/y 2>&1");
    let (_, out) = run_in(&c, &cmd, dir.path()).await;
    assert!(!out.contains("hello from"), "{out}");
    assert!(origin.seen().is_empty(), "{:?}", origin.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_host_is_asked_once_and_an_approval_always_is_remembered() {
    let origin = Origin::start().await;
    let port = origin.port;
    let dir = tempfile::tempdir().unwrap();
    let d = proxied(dir.path(), &[("CUBA_EXEC_PROXY_UNKNOWN", "ask")]).await;
    let c = d.client().await;
    // Two connections to the same host: one question.
    let cmd = format!(
        "curl -sS http://asked.test:{port}/one && curl -sS -p http://asked.test:{port}/two"
    );
    let (p, w) = held(&c, &cmd, dir.path()).await;
    let ask = w.process.asks.first().unwrap().clone();
    assert_eq!(ask.kind, AskKind::Network, "{ask:?}");
    assert!(ask.what.contains(&format!("asked.test:{port}")), "{ask:?}");
    let id = p.id.to_string();
    let (ok, _, said) = d.ctl(&["approve", &id, "--always"]).await;
    assert!(ok, "{said}");
    let done = wait_exit(&c, p.id).await;
    let out = text(&done.output.bytes());
    assert_eq!(done.process.exit_code, Some(0), "{out}");
    assert!(
        out.contains("hello from /one") && out.contains("hello from /two"),
        "{out}"
    );
    assert_eq!(done.process.asks.len(), 0);
    // A new command in the same directory is not asked again.
    let cmd = format!("curl -sS http://asked.test:{port}/three");
    let (code, out) = tokio::time::timeout(Duration::from_secs(30), run_in(&c, &cmd, dir.path()))
        .await
        .expect("a remembered host is not asked about again");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("hello from /three"), "{out}");
    // A denial: refused with the person's reason.
    let cmd = format!("curl -sS -w ' %{{http_code}}' http://other.test:{port}/four");
    let (p, _) = held(&c, &cmd, dir.path()).await;
    let id = p.id.to_string();
    let (ok, _, said) = d.ctl(&["deny", &id, "--reason", "not that one"]).await;
    assert!(ok, "{said}");
    let done = wait_exit(&c, p.id).await;
    let out = text(&done.output.bytes());
    assert!(out.contains("403") && out.contains("not that one"), "{out}");
    assert!(!origin.seen().iter().any(|l| l.contains("/four")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_preset_is_a_sandbox_the_daemon_starts_with() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "# mine\nmax_procs = 7\n").unwrap();
    let out = std::process::Command::new(cuba_tests::bin("cubactl"))
        .args(["setup", "--sandbox"])
        .env("CUBA_EXEC_CONFIG", &config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.starts_with("# mine\nmax_procs = 7\n"), "{text}");
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_CONFIG", config.to_str().unwrap())
        .start()
        .await;
    let (_, status, _) = d.ctl(&["daemon", "status"]).await;
    for part in [
        "writes: only under the command's cwd",
        "reads: everything but",
        "network: only through the daemon's proxy: allow registry.npmjs.org",
        "other hosts: ask",
    ] {
        assert!(status.contains(part), "{part}: {status}");
    }
    // It holds: no write outside the cwd, no way out but the proxy.
    let c = d.client().await;
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let cmd = format!(
        "echo x > {}/f; bash -c 'exec 3<>/dev/tcp/1.1.1.1/53' 2>&1; echo end",
        outside.path().display()
    );
    let (_, out) = run_in(&c, &cmd, dir.path()).await;
    assert!(
        out.contains("Permission denied") && out.contains("end"),
        "{out}"
    );
    assert!(!outside.path().join("f").exists());
    let again = std::process::Command::new(cuba_tests::bin("cubactl"))
        .args(["setup", "--sandbox", "--remove"])
        .env("CUBA_EXEC_CONFIG", &config)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# mine\nmax_procs = 7\n"
    );
}
