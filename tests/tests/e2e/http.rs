//! The HTTP endpoint (`cuba-exec serve --http`) at its edges, with plain HTTP requests: tokens
//! missing, wrong, expired and revoked (401 naming the metadata document), a token scoped to
//! hosts, Host and Origin checks (403), the bounds (a 10 MB body, headers a byte a second,
//! sessions per token, requests in flight), a session used with another token, 1000 sessions
//! open at once, and a client that drops mid-`wait` while a new session reads on.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use cuba_tests::http::HttpServer;
use cuba_tests::{bounded, TestDaemon, STEP};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test]
async fn tokens_are_required_and_a_revoked_or_expired_one_fails_at_once() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "", "").await;

    let none = s.request("POST", &[], b"{}").await;
    assert_eq!(none.status, 401, "{none:?}");
    let challenge = none.header("www-authenticate").unwrap();
    let doc_url = format!("http://{}/.well-known/oauth-protected-resource", s.addr);
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{doc_url}\"")),
        "{challenge}"
    );

    // RFC 9728: the document names this resource; no authorization server without [http.jwt].
    let doc = s.get("/.well-known/oauth-protected-resource").await;
    assert_eq!(doc.status, 200, "{doc:?}");
    let doc: serde_json::Value = serde_json::from_str(&doc.body).unwrap();
    assert_eq!(doc["resource"], format!("http://{}/mcp", s.addr));
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    assert!(doc.get("authorization_servers").is_none(), "{doc}");

    let wrong = s.rpc("cubatok_0000", None, "ping", json!({})).await;
    assert_eq!(wrong.status, 401);
    assert!(wrong
        .header("www-authenticate")
        .unwrap()
        .contains("error=\"invalid_token\""));

    let token = s.token(&["create", "laptop"]).await;
    let session = s.session(&token).await;
    let ran = s
        .call(&token, &session, "run", json!({"command": "echo via-http"}))
        .await;
    assert!(ran.text().contains("via-http"), "{ran:?}");

    // Only the hash is on disk.
    let file = std::fs::read_to_string(s.tokens_file()).unwrap();
    assert!(
        !file.contains(token.trim_start_matches("cubatok_")),
        "{file}"
    );

    // Expired: the file says so (as `--expires` writes it), and once a person confirms that
    // edit, the next request fails; before, the daemon keeps what it made.
    let expired = s.token(&["create", "old", "--expires", "1h"]).await;
    let ok = s.session(&expired).await;
    assert!(!ok.is_empty());
    let text = std::fs::read_to_string(s.tokens_file()).unwrap();
    let past: String = text
        .lines()
        .map(|l| match l.starts_with("expires = ") {
            true => "expires = 1".to_string(),
            false => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(s.tokens_file(), past).unwrap();
    let r = s.call(&expired, &ok, "list_processes", json!({})).await;
    assert_eq!(r.status, 200, "a hand edit is not in effect yet: {r:?}");
    let listed = s.token(&["list"]).await;
    assert!(listed.contains("old"), "{listed}");
    let reload = d.cubactl(&["daemon", "reload"]).output().await.unwrap();
    let said = String::from_utf8_lossy(&reload.stdout);
    assert!(
        reload.status.success() && said.contains("~ token old"),
        "{said}"
    );
    let r = s.call(&expired, &ok, "list_processes", json!({})).await;
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.body.contains("expired"), "{r:?}");

    // Revoked: the same session that worked a moment ago is refused on its next request.
    s.token(&["revoke", "laptop"]).await;
    let r = s.call(&token, &session, "list_processes", json!({})).await;
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.body.contains("revoked"), "{r:?}");
}

#[tokio::test]
async fn a_token_is_its_own_caller_with_its_scope() {
    let d = TestDaemon::start().await;
    // Two hosts whose bridges would fail: a scoped token must be refused before any is tried.
    let hosts = "[hosts.near]\ncommand = [\"false\"]\n[hosts.far]\ncommand = [\"false\"]\n";
    let s = HttpServer::start(&d, "", hosts).await;
    let root = d.dir().join("root");
    std::fs::create_dir(&root).unwrap();
    let root_text = root.to_str().unwrap();
    let token = s
        .token(&[
            "create", "phone", "--hosts", "near", "--allow", "echo,pwd", "--roots", root_text,
        ])
        .await;
    let session = s.session(&token).await;

    // Owner, default directory, narrowing.
    let r = s
        .call(&token, &session, "run", json!({"command": "pwd"}))
        .await;
    assert!(r.text().contains(root_text), "{r:?}");
    let list = s.call(&token, &session, "list_processes", json!({})).await;
    assert!(list.text().contains("owner:phone"), "{list:?}");
    let refused = s
        .call(&token, &session, "run", json!({"command": "ls /"}))
        .await;
    assert!(refused.text().contains("BLOCKED"), "{refused:?}");
    let outside = s
        .call(
            &token,
            &session,
            "run",
            json!({"command": "pwd", "cwd": "/"}),
        )
        .await;
    assert!(outside.text().contains("BLOCKED"), "{outside:?}");

    // Hosts: the other one is refused by policy; its own is tried (and its bridge fails).
    let far = s
        .call(
            &token,
            &session,
            "run",
            json!({"command": "echo x", "host": "far"}),
        )
        .await;
    assert!(far.text().contains("not allowed by policy"), "{far:?}");
    let near = s
        .call(
            &token,
            &session,
            "run",
            json!({"command": "echo x", "host": "near"}),
        )
        .await;
    assert!(!near.text().contains("not allowed"), "{near:?}");
    // A group cannot widen the scope: naming the other host refuses the whole call, and a
    // pattern reaches only this machine and the token's own host.
    for group in [json!("near,far"), json!(["far"]), json!("f*")] {
        let r = s
            .call(
                &token,
                &session,
                "run",
                json!({"command": "echo x", "host": group}),
            )
            .await;
        assert!(
            r.text().contains("not allowed by policy") || r.text().contains("no host matches"),
            "{group}: {r:?}"
        );
    }
    let every = s
        .call(
            &token,
            &session,
            "run",
            json!({"command": "echo x", "host": "*"}),
        )
        .await;
    let text = every.text();
    assert!(text.contains("[hosts:2 "), "{every:?}");
    assert!(
        text.contains("host near:") && !text.contains("far"),
        "{every:?}"
    );

    // A session is its token's: another token using its id finds no such session.
    let other = s.token(&["create", "intruder"]).await;
    let stolen = s.call(&other, &session, "list_processes", json!({})).await;
    assert_eq!(stolen.status, 404, "{stolen:?}");
}

#[tokio::test]
async fn forged_host_and_foreign_origin_are_forbidden() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "allowed_origins = [\"https://app.example:443\"]", "").await;
    let token = s.token(&["create", "web"]).await;
    let auth = format!("Bearer {token}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": cuba_tests::http::LEGACY, "capabilities": {},
        "clientInfo": {"name": "x", "version": "0"}}})
    .to_string();
    let base = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let with = |extra: (&'static str, &'static str)| {
        let mut h = base.to_vec();
        h.push(extra);
        h
    };
    let host = s
        .request("POST", &with(("Host", "rebound.example")), init.as_bytes())
        .await;
    assert_eq!(host.status, 403, "{host:?}");
    let origin = s
        .request(
            "POST",
            &with(("Origin", "https://evil.example")),
            init.as_bytes(),
        )
        .await;
    assert_eq!(origin.status, 403, "{origin:?}");
    let listed = s
        .request(
            "POST",
            &with(("Origin", "https://app.example")),
            init.as_bytes(),
        )
        .await;
    assert_eq!(listed.status, 200, "{listed:?}");
}

#[tokio::test]
async fn each_bound_refuses_saying_which_limit() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(
        &d,
        "max_body = \"1M\"\nheader_timeout = \"2s\"\nmax_sessions_per_token = 3\nmax_in_flight = 4",
        "",
    )
    .await;
    let token = s.token(&["create", "bounded"]).await;
    let auth = format!("Bearer {token}");

    // A 10 MB body.
    let big = vec![b'x'; 10 << 20];
    let r = bounded(
        "10 MB body",
        STEP,
        s.request("POST", &[("Authorization", &auth)], &big),
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.status);
    assert!(r.body.contains("max_body = 1048576"), "{}", r.body);

    // Headers a byte a second: 408 naming header_timeout, well before they would end.
    let slow = async {
        let mut stream = TcpStream::connect(&s.addr).await.unwrap();
        for b in b"POST /mcp HTTP/1.1\r\nHost: x\r\n" {
            if stream.write_all(&[*b]).await.is_err() {
                break;
            }
            let mut peek = [0u8; 1];
            // A byte a second, unless the server has answered (and closed) meanwhile.
            match tokio::time::timeout(Duration::from_secs(1), stream.peek(&mut peek)).await {
                Ok(_) => break,
                Err(_) => continue,
            }
        }
        cuba_tests::http::read_reply(stream).await
    };
    let r = bounded("slow headers", Duration::from_secs(15), slow).await;
    assert_eq!(r.status, 408, "{r:?}");
    assert!(r.body.contains("header_timeout = 2 s"), "{r:?}");

    // A body that never comes whole: 408 too, after the same time.
    let trickle = async {
        let mut stream = TcpStream::connect(&s.addr).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\n\
             Content-Length: 100\r\n\r\n{{\"jsonrpc\"",
            s.addr
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        cuba_tests::http::read_reply(stream).await
    };
    let r = bounded("a body never finished", Duration::from_secs(15), trickle).await;
    assert_eq!(r.status, 408, "{r:?}");
    assert!(
        r.body
            .contains("request body not received within header_timeout = 2 s"),
        "{r:?}"
    );

    // Sessions per token: the fourth is refused; ending one makes room.
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(s.session(&token).await);
    }
    let init = json!({"protocolVersion": cuba_tests::http::LEGACY, "capabilities": {},
        "clientInfo": {"name": "x", "version": "0"}});
    let fourth = s.rpc(&token, None, "initialize", init.clone()).await;
    assert_eq!(fourth.status, 429, "{fourth:?}");
    assert!(
        fourth.body.contains("max_sessions_per_token = 3"),
        "{fourth:?}"
    );
    let ended = s
        .request(
            "DELETE",
            &[("Authorization", &auth), ("Mcp-Session-Id", &open[0])],
            b"",
        )
        .await;
    assert_eq!(ended.status, 204, "{ended:?}");
    let again = s.rpc(&token, None, "initialize", init).await;
    assert_eq!(again.status, 200, "{again:?}");

    // Requests in flight: four long waits hold every place; the fifth request is refused,
    // and one place freed (a wait's client gone) serves again.
    let started = s
        .call(&token, &open[1], "start", json!({"command": "sleep 60"}))
        .await;
    assert!(started.text().contains("id:1"), "{started:?}");
    let mut waits = Vec::new();
    for _ in 0..4 {
        let args = json!({"id": 1, "until": "never", "timeout_ms": 60000});
        waits.push(s.begin_call(&token, &open[1], "wait", args).await);
    }
    let fifth = s.call(&token, &open[2], "list_processes", json!({})).await;
    assert_eq!(fifth.status, 503, "{fifth:?}");
    assert!(fifth.body.contains("max_in_flight = 4"), "{fifth:?}");
    drop(waits.pop());
    let freed = cuba_tests::wait_for_async(
        || async {
            s.call(&token, &open[2], "list_processes", json!({}))
                .await
                .status
                == 200
        },
        STEP,
    )
    .await;
    assert!(freed, "a dropped wait never gave its place back");
}

#[tokio::test]
async fn a_thousand_sessions_at_once() {
    let d = TestDaemon::start().await;
    let s = Arc::new(HttpServer::start(&d, "max_sessions_per_token = 2000", "").await);
    let token = s.token(&["create", "many"]).await;
    // 1000 sessions open together, made and used 100 connections at a time.
    let sem = Arc::new(tokio::sync::Semaphore::new(100));
    let mut made = Vec::new();
    for _ in 0..1000 {
        let (s, token, sem) = (s.clone(), token.clone(), sem.clone());
        made.push(tokio::spawn(async move {
            let _p = sem.acquire().await.unwrap();
            s.session(&token).await
        }));
    }
    let mut sessions = Vec::new();
    for m in made {
        sessions.push(
            bounded("1000 sessions", Duration::from_secs(120), m)
                .await
                .unwrap(),
        );
    }
    let distinct: std::collections::BTreeSet<_> = sessions.iter().collect();
    assert_eq!(distinct.len(), 1000);
    // Every one of them still answers.
    let mut calls = Vec::new();
    for id in sessions {
        let (s, token, sem) = (s.clone(), token.clone(), sem.clone());
        calls.push(tokio::spawn(async move {
            let _p = sem.acquire().await.unwrap();
            let r = s.call(&token, &id, "list_processes", json!({})).await;
            (r.status, r.text())
        }));
    }
    for c in calls {
        let (status, text) = bounded("1000 calls", Duration::from_secs(120), c)
            .await
            .unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("[processes:"), "{text}");
    }
}

#[tokio::test]
async fn a_client_dropped_mid_wait_leaves_its_process_and_a_new_session_reads_on() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "", "").await;
    let token = s.token(&["create", "flaky"]).await;
    let first = s.session(&token).await;
    let started = s
        .call(
            &token,
            &first,
            "start",
            json!({"command": "echo one; read x; echo two:$x; sleep 60"}),
        )
        .await;
    assert!(started.text().contains("id:1"), "{started:?}");

    // A wait that cannot end soon, on a connection cut once its reply has begun.
    let args = json!({"id": 1, "until": "never-printed", "timeout_ms": 60000});
    drop(s.begin_call(&token, &first, "wait", args).await);

    // A new session of the same token: the process runs on, and is read on by cursor.
    let second = s.session(&token).await;
    let status = s.call(&token, &second, "status", json!({"id": 1})).await;
    let text = status.text();
    assert!(
        text.contains("state:waiting_input") || text.contains("state:running"),
        "{text}"
    );
    assert!(text.contains("one"), "{text}");
    let next: u64 = text
        .split("next:")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no cursor in {text}"));
    let sent = s
        .call(
            &token,
            &second,
            "send_input",
            json!({"id": 1, "text": "hello\n"}),
        )
        .await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let read = s
        .call(
            &token,
            &second,
            "wait",
            json!({"id": 1, "since": next, "until": "two:", "timeout_ms": 20000}),
        )
        .await;
    let text = read.text();
    assert!(text.contains("two:hello"), "{text}");
    assert!(
        !text.contains("one"),
        "only output after the cursor: {text}"
    );
    s.call(
        &token,
        &second,
        "send_signal",
        json!({"id": 1, "signal": "KILL"}),
    )
    .await;
}

#[tokio::test]
async fn plain_http_off_loopback_is_refused_before_listening() {
    let d = TestDaemon::start().await;
    let config = d.dir().join("c.toml");
    std::fs::write(&config, "").unwrap();
    let out = bounded(
        "serve refused",
        STEP,
        tokio::process::Command::new(cuba_tests::bin("cuba-exec"))
            .args(["serve", "--http", "0.0.0.0:0"])
            .env("CUBA_EXEC_CONFIG", &config)
            .env("CUBA_EXEC_SOCKET", d.socket())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tls_cert") && err.contains("behind_proxy"),
        "{err}"
    );
}

/// Kills the endpoint `cubactl http start` left running, if a test ends early.
struct Started(Option<i32>);

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: a plain kill(2) of a pid this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[tokio::test]
async fn cubactl_starts_shows_and_stops_the_endpoint() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "", "").await;
    let cubactl = |args: &[&str]| {
        let mut cmd = s.command(&cuba_tests::bin("cubactl"));
        cmd.args(args).kill_on_drop(true);
        cmd
    };
    let run = |args: &'static [&'static str]| {
        let mut cmd = cubactl(args);
        async move {
            let out = bounded("cubactl", STEP, cmd.output()).await.unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        }
    };
    let (code, out) = run(&["http", "status"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!("serving http://{}/mcp", s.addr)),
        "{out}"
    );
    let (code, out) = run(&["daemon", "status"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!("http       serving http://{}/mcp", s.addr)),
        "{out}"
    );

    let (code, out) = run(&["http", "stop"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("stopped the HTTP endpoint"), "{out}");
    let (code, out) = run(&["http", "status"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("not running"), "{out}");

    // Started in the background: it outlives cubactl and serves.
    let (code, out) = run(&["http", "start", "127.0.0.1:0"]).await;
    assert_eq!(code, Some(0), "{out}");
    let pid: i32 = out
        .split("(pid ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out:?}"));
    let _guard = Started(Some(pid));
    let addr = out
        .split("http://")
        .nth(1)
        .and_then(|t| t.split("/mcp").next())
        .unwrap()
        .to_string();
    let mut probe = TcpStream::connect(&addr).await.unwrap();
    let reply = cuba_tests::http::exchange(&mut probe, &addr, "POST", "/mcp", &[], b"").await;
    assert_eq!(reply.status, 401);
    let (code, out) = run(&["http", "start"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("already serving"), "{out}");
    let (code, out) = run(&["http", "stop"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        !cuba_tests::pid_alive(pid),
        "pid {pid} still runs after http stop"
    );
}

#[tokio::test]
async fn an_idle_session_expires_and_frees_its_place() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "session_idle = \"1s\"\nmax_sessions_per_token = 1", "").await;
    let token = s.token(&["create", "idle"]).await;
    let first = s.session(&token).await;
    let init = json!({"protocolVersion": cuba_tests::http::LEGACY, "capabilities": {},
        "clientInfo": {"name": "x", "version": "0"}});
    let full = s.rpc(&token, None, "initialize", init.clone()).await;
    assert_eq!(full.status, 429, "{full:?}");
    // The expiry is the event: looked for (without touching the session, which would keep it
    // alive) by asking for a new one, bounded.
    let freed = cuba_tests::wait_for_async(
        || async { s.rpc(&token, None, "initialize", init.clone()).await.status == 200 },
        STEP,
    )
    .await;
    assert!(freed, "the idle session never expired");
    let r = s.call(&token, &first, "list_processes", json!({})).await;
    assert_eq!(r.status, 404, "{r:?}");
}

#[tokio::test]
async fn a_caller_gets_the_daemons_environment_with_its_secrets_hidden() {
    let secret = "s3cr3t-daemon-value-9431";
    let d = TestDaemon::builder()
        .env("DEPLOY_API_TOKEN", secret)
        .env("PLAIN_DAEMON_VAR", "from-the-daemon")
        .start()
        .await;
    let s = HttpServer::start(&d, "", "").await;
    let token = s.token(&["create", "reader"]).await;
    let session = s.session(&token).await;
    let r = s
        .call(
            &token,
            &session,
            "run",
            json!({"command": "echo $PLAIN_DAEMON_VAR; echo $DEPLOY_API_TOKEN; echo config=$CUBA_EXEC_CONFIG"}),
        )
        .await;
    let text = r.text();
    // The daemon's environment, not the endpoint's (whose settings file is its own).
    assert!(text.contains("from-the-daemon"), "{text}");
    assert!(text.contains("config=/dev/null"), "{text}");
    assert!(
        !text.contains(secret),
        "a secret of the daemon's environment shown: {text}"
    );
    assert!(text.contains("[REDACTED]"), "{text}");
}

#[tokio::test]
async fn host_and_origin_are_judged_once_and_never_echoed() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "allowed_origins = [\"https://app.example:443\"]", "").await;
    let addr = &s.addr;
    let post = |head: &str| {
        format!("POST /mcp HTTP/1.1\r\n{head}Content-Length: 2\r\nConnection: close\r\n\r\n{{}}")
    };
    // Two Host headers, two Origin headers: neither is picked; the request is refused.
    let two_hosts = s
        .raw(&post(&format!("Host: {addr}\r\nHost: evil.example\r\n")))
        .await;
    assert_eq!(two_hosts.status, 400, "{two_hosts:?}");
    let two_origins = s
        .raw(&post(&format!(
            "Host: {addr}\r\nOrigin: https://app.example\r\nOrigin: https://evil.example\r\n"
        )))
        .await;
    assert_eq!(two_origins.status, 400, "{two_origins:?}");
    // An absolute-form target naming another host than Host.
    let absolute = s
        .raw(&format!(
            "POST http://evil.example/mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 2\r\n\
             Connection: close\r\n\r\n{{}}"
        ))
        .await;
    assert_eq!(absolute.status, 400, "{absolute:?}");
    // A quote in Host never reaches the challenge (or anything else).
    let quoted = s.raw(&post("Host: localhost\", evil=\"x\r\n")).await;
    assert_eq!(quoted.status, 400, "{quoted:?}");
    assert!(quoted.header("www-authenticate").is_none(), "{quoted:?}");
    // The metadata document is served to this endpoint's hosts only.
    let forged = s
        .raw(
            "GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: rebound.example\r\n\
             Connection: close\r\n\r\n",
        )
        .await;
    assert_eq!(forged.status, 403, "{forged:?}");
    assert!(!forged.body.contains("rebound"), "{forged:?}");
}

#[tokio::test]
async fn an_allowed_browser_origin_gets_cors_and_another_does_not() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "allowed_origins = [\"https://app.example:443\"]", "").await;
    let preflight = |origin: &str| {
        format!(
            "OPTIONS /mcp HTTP/1.1\r\nHost: {}\r\nOrigin: {origin}\r\n\
             Access-Control-Request-Method: POST\r\n\
             Access-Control-Request-Headers: authorization, content-type, mcp-session-id\r\n\
             Connection: close\r\n\r\n",
            s.addr
        )
    };
    let ok = s.raw(&preflight("https://app.example")).await;
    assert_eq!(ok.status, 204, "{ok:?}");
    assert_eq!(
        ok.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let methods = ok
        .header("access-control-allow-methods")
        .unwrap_or_default();
    assert!(
        methods.contains("POST") && methods.contains("DELETE"),
        "{ok:?}"
    );
    let headers = ok
        .header("access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    for h in [
        "authorization",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    ] {
        assert!(headers.contains(h), "{h}: {ok:?}");
    }
    assert!(ok.header("access-control-max-age").is_some(), "{ok:?}");
    let evil = s.raw(&preflight("https://evil.example")).await;
    assert_eq!(evil.status, 403, "{evil:?}");
    assert!(evil.header("access-control-allow-origin").is_none());

    // The requests themselves: the allowed origin may read the reply and the session id.
    let token = s.token(&["create", "browser"]).await;
    let auth = format!("Bearer {token}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": cuba_tests::http::LEGACY, "capabilities": {},
        "clientInfo": {"name": "x", "version": "0"}}})
    .to_string();
    let r = s
        .request(
            "POST",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Origin", "https://app.example"),
            ],
            init.as_bytes(),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert!(
        r.header("vary").unwrap_or_default().contains("Origin"),
        "{r:?}"
    );
    let exposed = r
        .header("access-control-expose-headers")
        .unwrap_or_default();
    assert!(exposed.contains("Mcp-Session-Id"), "{r:?}");
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_without_a_408() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "header_timeout = \"1s\"", "").await;
    let mut conn = TcpStream::connect(&s.addr).await.unwrap();
    let get = format!(
        "GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: {}\r\n\r\n",
        s.addr
    );
    conn.write_all(get.as_bytes()).await.unwrap();
    let first = cuba_tests::http::read_one(&mut conn).await;
    assert_eq!(first.status, 200, "{first:?}");
    // Idle past header_timeout: the endpoint closes the connection, writing nothing (a 408
    // now would meet the client's next request as its answer).
    let mut rest = Vec::new();
    bounded(
        "the idle connection to close",
        STEP,
        tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut rest),
    )
    .await
    .unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

#[tokio::test]
async fn a_rooted_tokens_commands_start_in_its_first_root_on_a_host_too() {
    let d = TestDaemon::start().await;
    // A host reached through `cubactl bridge` to the same daemon: a remote caller, as an ssh
    // host's would be.
    let cubactl = cuba_tests::bin("cubactl");
    let hosts = format!(
        "[hosts.loop]\ncommand = [{:?}, \"bridge\"]\ncwd = \"/\"\n",
        cubactl.to_str().unwrap()
    );
    let s = HttpServer::start(&d, "", &hosts).await;
    let root = d.dir().join("root-on-host");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let root_text = root.to_str().unwrap();
    let token = s.token(&["create", "rooted", "--roots", root_text]).await;
    let session = s.session(&token).await;
    let there = s
        .call(
            &token,
            &session,
            "run",
            json!({"command": "pwd", "host": "loop"}),
        )
        .await;
    assert!(there.text().contains(root_text), "{there:?}");
    let here = s
        .call(&token, &session, "run", json!({"command": "pwd"}))
        .await;
    assert!(here.text().contains(root_text), "{here:?}");
}

#[tokio::test]
async fn the_log_has_no_line_per_session_at_its_default_level() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start_logging(&d, "", "", None).await;
    let token = s.token(&["create", "quiet"]).await;
    let before = s.log().len();
    for _ in 0..20 {
        let session = s.session(&token).await;
        let r = s.call(&token, &session, "list_processes", json!({})).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let grown = s.log().len() - before;
    // Per-session lines are at debug: 20 sessions add (nearly) nothing.
    assert!(grown < 400, "{grown} bytes for 20 sessions:\n{}", s.log());
}
