//! Container hosts through MCP, end to end: the real `cuba-exec` binary reaching a daemon
//! inside a podman container made from an image on first use (its own cubactl and cubad
//! copied in), and a container stopped under a call.

use crate::common;

use common::mcp::{self, reply_of, Mcp};
use common::{TestDir, STEP};
use cuba_tests::containers::{Podman, ENGINE_STEP};
use serde_json::json;

/// This machine's side (the shim and the daemon it starts) and the containers. Declared in
/// drop order: the shim goes before its containers.
struct World {
    _local: TestDir,
    podman: Podman,
}

/// A world with the image host `box`, its container's name, and the shim as client `agent`;
/// `None` when podman is missing here (a skip).
async fn world() -> Option<(World, String, Mcp)> {
    let mut podman = Podman::new()?;
    let name = podman.image_host("box");
    let mut local = TestDir::new();
    let env: Vec<(&str, String)> = podman
        .env()
        .into_iter()
        .map(|(k, v)| (k, v.to_string_lossy().into_owned()))
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let c = mcp::binary(&mut local, "agent", &env).await;
    let world = World {
        _local: local,
        podman,
    };
    Some((world, name, c))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_start_list_and_signal_on_a_container_host() {
    let Some((w, name, c)) = world().await else {
        return;
    };
    // The first call makes the container and copies the build in: more than a step.
    let r = c
        .call_within(
            "run",
            json!({ "command": "echo hi", "host": "box" }),
            ENGINE_STEP,
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert!(r.text().contains(" host:box "), "{}", r.text());
    assert_eq!(r.sc()["host"], "box");
    assert_eq!(r.output(), "hi\n");
    assert_eq!(w.podman.status(&name).await, "running");
    let r = c
        .call("start", json!({ "command": "sleep 300", "host": "box" }))
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let id = r.id();
    let r = c.call("status", json!({ "id": id, "host": "box" })).await;
    assert_eq!(r.state(), "running", "{}", r.text());
    let rows = c.rows(json!({ "host": "box" })).await;
    assert!(
        rows.iter().any(|r| r["id"] == id && r["host"] == "box"),
        "{rows:?}"
    );
    // This machine's table has none of it.
    let local = c.rows(json!({})).await;
    assert!(local.iter().all(|r| r["host"].is_null()), "{local:?}");
    let r = c
        .call("send_signal", json!({ "id": id, "host": "box" }))
        .await;
    assert_eq!(r.state(), "killed", "{}", r.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_on_a_container_host_is_typed_into_and_read() {
    let Some((_w, _name, c)) = world().await else {
        return;
    };
    let start = json!({
        "command": "bash --norc --noprofile",
        "tty": true,
        "env": { "PS1": "cx$ " },
        "host": "box",
    });
    let r = c.call_within("start", start, ENGINE_STEP).await;
    assert!(!r.is_error(), "{}", r.text());
    let id = r.id();
    // Typed once bash is at its prompt: the keys reach readline, not a shell still starting.
    let prompt = json!({ "id": id, "until": "cx\\$ ", "timeout_ms": 15_000, "host": "box" });
    let r = c.call("wait", prompt).await;
    assert_eq!(r.str("wait"), "matched", "{}", r.text());
    let send = json!({ "id": id, "text": "echo $((6*7))", "keys": ["Enter"], "host": "box" });
    let r = c.call("send_input", send).await;
    assert!(!r.is_error(), "{}", r.text());
    // Not `^42`: readline ends bracketed paste (`\e[?2004l\r`) before the echo prints.
    let answer = json!({ "id": id, "until": "42", "timeout_ms": 15_000, "host": "box" });
    let r = c.call("wait", answer).await;
    assert_eq!(r.str("wait"), "matched", "{}", r.text());
    let r = c
        .call(
            "status",
            json!({ "id": id, "view": "screen", "host": "box" }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let lines = r.sc()["screen"]["lines"].as_array().expect("lines").clone();
    let lines: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.as_str())
        .map(str::trim)
        .collect();
    assert!(lines.contains(&"42"), "{}", r.text());
    assert!(lines.contains(&"cx$ echo $((6*7))"), "{}", r.text());
    c.call("send_signal", json!({ "id": id, "host": "box" }))
        .await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_stopped_under_a_wait_is_an_error_and_the_next_call_starts_it() {
    let Some((w, name, c)) = world().await else {
        return;
    };
    let start = json!({ "command": "sleep 300", "host": "box" });
    let r = c.call_within("start", start, ENGINE_STEP).await;
    assert!(!r.is_error(), "{}", r.text());
    let id = r.id();
    let pending = c
        .send_call(
            "wait",
            json!({ "id": id, "host": "box", "timeout_ms": 50_000 }),
        )
        .await;
    // The wait is in flight once the server answers a later call to the same host.
    let r = c.call("status", json!({ "id": id, "host": "box" })).await;
    assert_eq!(r.state(), "running", "{}", r.text());
    w.podman.stop(&name).await;
    // The bound is the check: a stopped container ends the call, it does not hang it.
    let r = reply_of(pending, STEP).await;
    assert!(r.is_error(), "{}", r.text());
    assert!(
        r.text().contains(&format!("container {name} stopped"))
            && r.text().contains("under this call")
            && r.text().contains("The next call starts it again"),
        "{}",
        r.text()
    );
    let again = json!({ "command": "echo again", "host": "box" });
    let r = c.call_within("run", again, ENGINE_STEP).await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(r.output(), "again\n");
    assert_eq!(w.podman.status(&name).await, "running");
    let r = c.call("status", json!({ "id": id, "host": "box" })).await;
    assert_eq!(r.state(), "lost", "ended with its container: {}", r.text());
    c.close().await;
}
