//! The OS sandbox end to end: with `CUBA_EXEC_SANDBOX=workspace-write` a command writes inside
//! the allowed roots and the temp dir but gets EACCES anywhere else, and still reads anything;
//! with `CUBA_EXEC_NETWORK=0` it cannot reach a loopback listener outside its namespace, which
//! an unsandboxed daemon's command can. A bad sandbox setting stops the daemon at start-up.

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cuba_protocol::client::Client;
use cuba_tests::{bin, run_in, TestDaemon, STEP};

/// A directory outside the allowed roots and outside `/tmp` (removed when dropped).
fn outside_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cx-sandbox-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_write_allows_the_roots_and_tmp_and_refuses_writes_elsewhere() {
    let root = tempfile::tempdir().unwrap();
    let work = root.path().canonicalize().unwrap().join("work");
    std::fs::create_dir(&work).unwrap();
    let outside = outside_dir();
    let target = outside.path().join("escaped");
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .env("CUBA_EXEC_ALLOWED_DIRS", work.to_str().unwrap())
        .start()
        .await;
    let c = d.client().await;

    let (code, out) = run_in(&c, "echo inside > inside.txt && cat inside.txt", &work).await;
    assert_eq!(code, Some(0), "a write inside the root works: {out}");
    assert_eq!(
        std::fs::read_to_string(work.join("inside.txt")).unwrap(),
        "inside\n"
    );

    let tmp_file = root.path().join("tmp-write");
    let (code, out) = run_in(&c, &format!("echo t > {}", tmp_file.display()), &work).await;
    assert_eq!(code, Some(0), "the temp dir is writable: {out}");

    let (code, out) = run_in(&c, &format!("echo no > {}", target.display()), &work).await;
    assert_ne!(code, Some(0), "a write outside the roots fails: {out}");
    assert!(out.contains("Permission denied"), "EACCES: {out}");
    assert!(!target.exists(), "nothing was written outside the roots");

    let (code, out) = run_in(&c, &format!("mkdir {}/d", outside.path().display()), &work).await;
    assert_ne!(
        code,
        Some(0),
        "no directory outside the roots either: {out}"
    );

    let (code, out) = run_in(&c, "cat /etc/hostname > /dev/null && echo read-ok", &work).await;
    assert_eq!(code, Some(0), "reading is not restricted: {out}");
    assert!(out.contains("read-ok"), "{out}");

    // The same write from an unsandboxed daemon succeeds: the refusal came from the sandbox.
    let plain = TestDaemon::builder()
        .env("CUBA_EXEC_ALLOWED_DIRS", work.to_str().unwrap())
        .start()
        .await;
    let pc = plain.client().await;
    let (code, out) = run_in(&pc, &format!("echo yes > {}", target.display()), &work).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_roots_the_cwd_is_the_writable_root() {
    let outside = outside_dir();
    let (cwd, other) = (outside.path().join("cwd"), outside.path().join("other"));
    std::fs::create_dir(&cwd).unwrap();
    std::fs::create_dir(&other).unwrap();
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .start()
        .await;
    let c = d.client().await;
    let (code, out) = run_in(&c, "echo here > f && cat f", &cwd).await;
    assert_eq!(code, Some(0), "the cwd is writable: {out}");
    let (code, out) = run_in(&c, &format!("echo no > {}/f", other.display()), &cwd).await;
    assert_ne!(code, Some(0), "a sibling of the cwd is not: {out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!other.join("f").exists());
}

/// Connects to `port` on 127.0.0.1 with bash's /dev/tcp, printing `connected` on success.
fn connect_command(port: u16) -> String {
    format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_network_cannot_reach_a_loopback_listener_outside() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cwd = tempfile::tempdir().unwrap();

    let d = TestDaemon::builder()
        .env("CUBA_EXEC_NETWORK", "0")
        .start()
        .await;
    let c = d.client().await;
    let (code, out) = run_in(&c, &connect_command(port), cwd.path()).await;
    assert_ne!(code, Some(0), "the connect fails in the namespace: {out}");
    assert!(!out.contains("connected"), "{out}");

    let plain = TestDaemon::start().await;
    let pc = plain.client().await;
    let (code, out) = run_in(&pc, &connect_command(port), cwd.path()).await;
    assert_eq!(code, Some(0), "the same connect works unsandboxed: {out}");
    assert!(out.contains("connected"), "{out}");
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_together_confine_writes_and_network() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let work = tempfile::tempdir().unwrap();
    let outside = outside_dir();
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .env("CUBA_EXEC_NETWORK", "0")
        .start()
        .await;
    let c = d.client().await;
    let (code, out) = run_in(&c, "echo ok > f && echo wrote", work.path()).await;
    assert_eq!(code, Some(0), "{out}");
    let target = outside.path().join("x");
    let (code, out) = run_in(&c, &format!("echo no > {}", target.display()), work.path()).await;
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    let (code, out) = run_in(&c, &connect_command(port), work.path()).await;
    assert_ne!(code, Some(0), "{out}");
    drop(listener);
}

#[test]
fn a_bad_sandbox_setting_stops_the_daemon_at_start_up() {
    let dir = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap();
    let mut child = Command::new(bin("cubad"))
        .arg("--socket")
        .arg(dir.path().join("s"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env("CUBA_EXEC_CONFIG", "/dev/null")
        .env("CUBA_EXEC_SANDBOX", "read-only-please")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + STEP;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cubad did not exit on a bad sandbox setting");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(err.contains("CUBA_EXEC_SANDBOX"), "{err}");
}

/// A connection whose own environment asks for a sandbox, as an editor's MCP config can.
async fn client_with(d: &TestDaemon, vars: &[(&str, &str)]) -> Client {
    let mut info = cuba_protocol::client::this_client(cuba_protocol::ClientKind::Other, "boxed");
    info.env
        .retain(|(k, _)| !k.to_string_lossy().starts_with("CUBA_EXEC_"));
    info.env
        .extend(vars.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    cuba_tests::bounded("connect", STEP, Client::connect(d.socket(), info))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_can_ask_for_a_sandbox_the_daemon_does_not_impose() {
    let root = tempfile::tempdir().unwrap();
    let work = root.path().canonicalize().unwrap().join("work");
    std::fs::create_dir(&work).unwrap();
    let outside = outside_dir();
    let target = outside.path().join("escaped");
    let write = format!("echo x > {}", target.display());
    let d = TestDaemon::start().await;
    let dirs = work.to_str().unwrap();
    let boxed = client_with(
        &d,
        &[
            ("CUBA_EXEC_SANDBOX", "workspace-write"),
            ("CUBA_EXEC_ALLOWED_DIRS", dirs),
        ],
    )
    .await;
    let (code, out) = run_in(&boxed, &write, &work).await;
    assert_ne!(
        code,
        Some(0),
        "the boxed client's command wrote outside: {out}"
    );
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!target.exists());
    let (code, out) = run_in(&boxed, "echo in > in.txt", &work).await;
    assert_eq!(code, Some(0), "inside its root it writes: {out}");

    // Another client of the same daemon is not confined by that request.
    let plain = d.client().await;
    let (code, out) = run_in(&plain, &write, &work).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(target.exists());
}
