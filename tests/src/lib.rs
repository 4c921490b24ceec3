//! Shared helpers for the end-to-end tests: the real `cubad` under a [`TestDaemon`] guard, and
//! short helpers for spawning, waiting and reading through the protocol client.
//!
//! Every helper that awaits is bounded by a timeout and panics with what it was waiting for, so
//! a hung daemon fails a test instead of hanging the suite.
//!
//! - [`containers`]: container hosts made with the real podman, removed when the test ends.
//! - [`daemon`]: a test's private `cubad` world in a short temp dir, the one the end-to-end, MCP
//!   and CLI tests share: started here or by a client on demand, restarted, SIGKILLed, cleaned up.
//! - [`exec_corpus`]: the ways to reach a blocked program that the exec checks must stop.
//! - [`git_http`]: a stand-in git server that asks for credentials and records what git sends.
//! - [`http`]: `cuba-exec serve --http` for one test, and a hand-written HTTP/1.1 client.
//! - [`machine`]: what this machine has (root, cgroups, kernel), and [`machine::skip`], the one
//!   way a test that cannot run here says so.
//! - [`procfs`]: what `/proc` says about processes (alive, markers, command lines, RSS).
//! - [`proxy`]: a socket proxy that cuts the connection carrying a chosen request, once.
//! - [`raw`]: hand-made frames on a bare socket, for hostile-client tests.
//! - [`small_state`]: a small state directory (a tmpfs, or a file-size limit) for a full disk.
//! - [`sshd`]: a real OpenSSH server on 127.0.0.1 and a client config naming it, for the tests
//!   of remote hosts.

pub mod cgroups;
pub mod containers;
pub mod daemon;
pub mod exec_corpus;
pub mod follow;
pub mod git_http;
pub mod http;
pub mod http_reply;
pub mod json_doc;
pub mod machine;
pub mod procfs;
pub mod proxy;
pub mod raw;
pub mod small_state;
pub mod sshd;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cuba_protocol::client::Client;
use cuba_protocol::{
    ProcessInfo, ReadRequest, SpawnRequest, StreamFilter, WaitReason, WaitRequest, WaitResult,
    WaitSpec,
};

pub use daemon::TestDaemon;
pub use procfs::pid_alive;
pub use sshd::SshServer;

/// How long one ordinary step (a request, a short process) may take before the test fails.
pub const STEP: Duration = Duration::from_secs(20);

/// A binary of this workspace, beside the test executable's `deps/` directory.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/<test>-<hash> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} not found: run `cargo build --workspace` first",
        path.display()
    );
    path
}

/// Awaits `fut`, failing the test if it takes longer than `limit`.
pub async fn bounded<T>(what: &str, limit: Duration, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {limit:?}: {what}"),
    }
}

/// `fut.step()`: awaits `fut` bounded by [`STEP`], failing the test (naming the caller's line)
/// if it takes longer.
pub trait Step: Future + Sized {
    #[track_caller]
    fn step(self) -> impl Future<Output = Self::Output> {
        let at = std::panic::Location::caller();
        async move {
            match tokio::time::timeout(STEP, self).await {
                Ok(v) => v,
                Err(_) => panic!("timed out after {STEP:?}: the call at {at}"),
            }
        }
    }
}

impl<F: Future> Step for F {}

/// Re-checks `cond` every 10 ms until it holds or `limit` passes; returns whether it held.
/// Only for conditions no event announces (a pid vanishing, a file appearing).
pub async fn wait_for(mut cond: impl FnMut() -> bool, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// As [`wait_for`], for a condition that needs the daemon (an async one).
pub async fn wait_for_async<F, Fut>(mut cond: F, limit: Duration) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A spawn request for `command` with every option at its default.
pub fn spawn_req(command: &str) -> SpawnRequest {
    SpawnRequest {
        command: command.to_string(),
        ..SpawnRequest::default()
    }
}

/// Spawns `req`, failing the test if the daemon refuses it.
pub async fn spawn_with(client: &Client, req: SpawnRequest) -> ProcessInfo {
    let command = req.command.chars().take(80).collect::<String>();
    bounded("spawn", STEP, client.spawn(req))
        .await
        .unwrap_or_else(|e| panic!("spawn of {command:?} failed: {e}"))
}

/// Spawns `command` with default options.
pub async fn spawn(client: &Client, command: &str) -> ProcessInfo {
    spawn_with(client, spawn_req(command)).await
}

fn wait_req(id: u64) -> WaitRequest {
    WaitRequest {
        id,
        since: Some(0),
        spec: WaitSpec::exit(STEP.as_millis() as u64, 1 << 20),
    }
}

/// Waits until process `id` has ended and all its output is in; returns the daemon's answer.
pub async fn wait_exit(client: &Client, id: u64) -> WaitResult {
    wait_exit_within(client, id, STEP).await
}

/// [`wait_exit`] for a command whose work takes longer than a step (thousands of processes on
/// a loaded machine): the daemon waits up to `limit`.
pub async fn wait_exit_within(client: &Client, id: u64, limit: Duration) -> WaitResult {
    let mut req = wait_req(id);
    req.spec.timeout_ms = limit.as_millis() as u64;
    let w = bounded(
        &format!("wait for process {id}"),
        limit + Duration::from_secs(5),
        client.wait(req),
    )
    .await
    .unwrap_or_else(|e| panic!("wait for process {id} failed: {e}"));
    assert_eq!(
        w.reason,
        WaitReason::Exited,
        "process {id} did not end in time: {:?}",
        w.process
    );
    w
}

/// Waits until a line of process `id`'s output (from the start) matches `pattern`; returns the
/// line.
pub async fn wait_match(client: &Client, id: u64, pattern: &str) -> String {
    let mut req = wait_req(id);
    req.spec.until = Some(pattern.to_string());
    let w = bounded(
        &format!("wait for {pattern:?} from process {id}"),
        STEP + Duration::from_secs(5),
        client.wait(req),
    )
    .await
    .unwrap_or_else(|e| panic!("wait for {pattern:?} failed: {e}"));
    match w.reason {
        WaitReason::Matched(line) => line,
        other => panic!(
            "process {id} gave no line matching {pattern:?} ({other:?}); output: {:?}",
            text(&w.output.bytes())
        ),
    }
}

/// The number after `key=` in `line` (e.g. the pid a command printed as `child=1234`).
pub fn number_after(line: &str, key: &str) -> i32 {
    let at = line
        .find(&format!("{key}="))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"));
    line[at + key.len() + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no number after {key}= in {line:?}"))
}

/// All output of process `id` (both streams), read with cursors from the start. Fails the test
/// if any byte was dropped.
pub async fn read_all(client: &Client, id: u64) -> Vec<u8> {
    read_stream(client, id, StreamFilter::Both).await
}

/// Like [`read_all`], for one stream or both.
pub async fn read_stream(client: &Client, id: u64, stream: StreamFilter) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cursor = 0;
    loop {
        let req = ReadRequest {
            id,
            since: Some(cursor),
            max_bytes: 1 << 20,
            stream,
        };
        let r = bounded("read", STEP, client.read(req))
            .await
            .unwrap_or_else(|e| panic!("read of process {id} failed: {e}"));
        assert_eq!(r.dropped, 0, "bytes of process {id} were dropped: {r:?}");
        out.extend(r.bytes());
        if r.next >= r.total {
            return out;
        }
        assert!(r.next > cursor, "read made no progress at {cursor}: {r:?}");
        cursor = r.next;
    }
}

/// Bytes as text, for assertions and messages.
/// Runs `command` in `cwd` to its end: its exit code and output.
pub async fn run_in(
    client: &Client,
    command: &str,
    cwd: &std::path::Path,
) -> (Option<i32>, String) {
    let req = SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..spawn_req(command)
    };
    let p = spawn_with(client, req).await;
    let done = wait_exit(client, p.id).await;
    (done.process.exit_code, text(&done.output.bytes()))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A connection to `d` of `kind` named `name` whose only `CUBA_EXEC_*` variables (its own policy
/// settings, in its hello) are `vars`.
pub async fn client_with(
    d: &TestDaemon,
    kind: cuba_protocol::ClientKind,
    name: &str,
    vars: &[(&str, &str)],
) -> Client {
    let mut info = cuba_protocol::client::this_client(kind, name);
    info.env
        .retain(|(k, _)| !k.to_string_lossy().starts_with("CUBA_EXEC_"));
    info.env
        .extend(vars.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    bounded("connect", STEP, Client::connect(d.socket(), info))
        .await
        .unwrap_or_else(|e| panic!("cannot connect to cubad: {e}"))
}
