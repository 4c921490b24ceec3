//! Pods as hosts, without a cluster: `kubectl` is a stand-in (`tests/fixtures/kubectl.py`)
//! that runs the bridge command it is given against a second daemon, as `kubectl exec -i`
//! runs it in a pod, logs what the client sends, and can cut each stream after a while, as a
//! kubelet does. What is tested is ours: the `kubectl` command line, keep-alives on an idle
//! link, and a link cut under a `wait` and a `run` losing nothing.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::mcp::{self, Mcp};
use common::{wait_for, TestDir, STEP};
use serde_json::{json, Value};

struct Pod {
    /// Declared first, dropped first: the shim and this machine's daemon go before the pod's.
    local: TestDir,
    pod: TestDir,
    log: PathBuf,
}

/// The stand-in's log: one JSON object per line.
fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

impl Pod {
    async fn new() -> Pod {
        let pod = TestDir::with_daemon().await;
        let local = TestDir::new();
        let log = local.path().join("kubectl.log");
        Pod { local, pod, log }
    }

    /// The shim with host `web` = pod `web-0` of namespace `dev`, keep-alive every
    /// `keepalive` s, each stream cut after `drop_after` s when given.
    async fn shim(&mut self, keepalive: u64, drop_after: Option<&str>) -> Mcp {
        let bin = self.local.path().join("bin");
        std::fs::create_dir_all(&bin).expect("the stand-in's dir");
        let standin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/kubectl.py");
        std::os::unix::fs::symlink(&standin, bin.join("kubectl")).expect("kubectl on PATH");
        let cubactl = common::hosts::cubactl_bin().display().to_string();
        let config = self.local.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[hosts.web]\npod = \"web-0\"\nnamespace = \"dev\"\ncontext = \"kind-test\"\n\
                 remote_bin = {cubactl:?}\nkeepalive = {keepalive}\n"
            ),
        )
        .expect("the config");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let config = config.display().to_string();
        let socket = self.pod.socket().display().to_string();
        let log = self.log.display().to_string();
        let mut env = vec![
            ("CUBA_EXEC_CONFIG", config.as_str()),
            ("PATH", path.as_str()),
            ("CUBA_TEST_POD_SOCKET", socket.as_str()),
            ("CUBA_TEST_POD_LOG", log.as_str()),
        ];
        if let Some(after) = drop_after {
            env.push(("CUBA_TEST_POD_DROP_AFTER", after));
        }
        mcp::binary(&mut self.local, "agent", &env).await
    }

    fn starts(&self) -> Vec<Value> {
        events(&self.log)
            .into_iter()
            .filter(|e| e["event"] == "start")
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_reached_through_kubectl_exec_and_kept_alive_while_idle() {
    let mut w = Pod::new().await;
    let c = w.shim(1, None).await;
    let r = c
        .call(
            "run",
            json!({ "command": "echo in-the-pod", "host": "web" }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(r.output().trim(), "in-the-pod");
    let starts = w.starts();
    assert_eq!(starts.len(), 1, "one stream for both calls: {starts:?}");
    let cubactl = common::hosts::cubactl_bin().display().to_string();
    assert_eq!(
        starts[0]["argv"],
        json!([
            "--context",
            "kind-test",
            "-n",
            "dev",
            "exec",
            "-i",
            "web-0",
            "--",
            cubactl,
            "bridge"
        ])
    );
    // Idle now: the client still sends, once a second, on the same stream.
    let after = events(&w.log)
        .last()
        .and_then(|e| e["t"].as_f64())
        .unwrap_or(0.0);
    let kept = wait_for(
        || {
            events(&w.log)
                .iter()
                .filter(|e| e["event"] == "up" && e["t"].as_f64().unwrap_or(0.0) > after)
                .count()
                >= 2
        },
        STEP,
    )
    .await;
    assert!(kept, "no keep-alive on the idle link: {:?}", events(&w.log));
    assert_eq!(w.starts().len(), 1, "the same stream all along");
    let r = c.call("list_hosts", json!({})).await;
    assert!(
        r.text().contains("host:web via:kubectl pod dev/web-0 ok"),
        "{}",
        r.text()
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_under_a_wait_loses_no_output_and_keeps_cursors() {
    let mut w = Pod::new().await;
    // Every stream is cut after 1.5 s: a 5 s command outlives several.
    let c = w.shim(60, Some("1.5")).await;
    let command = "for i in $(seq 1 50); do echo line$i; sleep 0.1; done";
    let r = c
        .call("start", json!({ "command": command, "host": "web" }))
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let id = r.id();
    let first = c.call("status", json!({ "id": id, "host": "web" })).await;
    let cursor = first.u64("next");
    let seen = first.output().to_string();
    let r = c
        .call_within(
            "wait",
            json!({ "id": id, "host": "web", "since": cursor, "timeout_ms": 30_000 }),
            Duration::from_secs(60),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(r.str("wait"), "exited", "{}", r.text());
    let all: Vec<String> = (1..=50).map(|i| format!("line{i}")).collect();
    let got = format!("{seen}{}", r.output());
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        all,
        "each line once, in order, across the cuts"
    );
    assert!(
        w.starts().len() >= 3,
        "the stream was cut and made again: {:?}",
        w.starts()
    );
    // A run whose wait is cut: the same request (its token) is asked again, nothing runs twice.
    let r = c
        .call_within(
            "run",
            json!({ "command": "sleep 2; echo once >> ran.txt; cat ran.txt", "host": "web",
                    "cwd": w.pod.path().display().to_string() }),
            Duration::from_secs(60),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(r.output().trim(), "once", "{}", r.text());
    c.close().await;
}
