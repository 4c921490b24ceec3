//! One command on many hosts through MCP: the real `cuba-exec` binary reaching several daemons
//! of their own (socket, state, environment), each through a `command` bridge running
//! `cubactl bridge` there, as it reaches other machines; `run`/`start` on a group, the folded
//! reply, the concurrency cap, and the tools that take one host refusing a group.

use crate::common;

use std::fmt::Write as _;
use std::fs;

use common::hosts::cubactl_bin;
use common::mcp::{self, Mcp, Reply};
use common::TestDir;
use serde_json::{json, Value};

/// The variable each host's daemon has, set to the host's name.
const MARK: &str = "CUBA_TEST_HOST";

/// This machine's daemon (started by the shim) and a daemon per "remote" host.
struct World {
    /// Declared first, dropped first: the shim and this machine's daemon go before the rest.
    local: TestDir,
    remotes: Vec<TestDir>,
    config: String,
}

impl World {
    /// A daemon for each of `names`, each a `[hosts.NAME]` reached through `cubactl bridge`.
    async fn new(names: &[&str]) -> World {
        let mut w = World {
            local: TestDir::new(),
            remotes: Vec::new(),
            config: String::new(),
        };
        let cubactl = cubactl_bin().display().to_string();
        for name in names {
            let remote = TestDir::with_daemon_env(&[(MARK, name)]).await;
            let socket = format!("CUBA_EXEC_SOCKET={}", remote.socket().display());
            let bridge = ["env", &socket, &cubactl, "bridge"];
            w.command_host(name, &bridge);
            w.remotes.push(remote);
        }
        w
    }

    /// `[hosts.NAME]` with `command` as its bridge.
    fn command_host(&mut self, name: &str, command: &[&str]) {
        let items: Vec<String> = command.iter().map(|i| format!("{i:?}")).collect();
        let _ = write!(
            self.config,
            "\n[hosts.{name}]\ncommand = [{}]\n",
            items.join(", ")
        );
    }

    /// A host whose bridge cannot start: unreachable.
    fn dead_host(&mut self, name: &str) {
        self.command_host(name, &["/nonexistent/bridge"]);
    }

    /// The shim binary with this world's config, `set` on top.
    async fn shim(&mut self, set: &[(&str, &str)]) -> Mcp {
        let path = self.local.path().join("config.toml");
        fs::write(&path, &self.config).expect("the config file");
        let path = path.display().to_string();
        let mut env = vec![("CUBA_EXEC_CONFIG", path.as_str())];
        env.extend_from_slice(set);
        mcp::binary(&mut self.local, "agent", &env).await
    }
}

/// `structuredContent.hosts` of a group's reply, checked to keep the process reply's shape.
fn hosts_of(r: &Reply) -> Vec<Value> {
    assert_eq!(r.id(), 0, "{}", r.text());
    assert_eq!(r.state(), "group", "{}", r.text());
    assert_eq!(r.u64("next"), 0);
    // The folded text is the output: all of the text but its header line.
    let (_, body) = r.text().split_once('\n').unwrap_or((r.text(), ""));
    assert_eq!(r.output(), body);
    r.sc()["hosts"].as_array().expect("hosts").clone()
}

/// The id `host` got, from `structuredContent.hosts`.
fn id_on(hosts: &[Value], host: &str) -> u64 {
    let h = hosts.iter().find(|h| h["host"] == host);
    h.and_then(|h| h["id"].as_u64())
        .unwrap_or_else(|| panic!("no id for {host} in {hosts:?}"))
}

/// The index of the first line of `text` that starts with `start`.
fn line_at(text: &str, start: &str) -> usize {
    text.lines()
        .position(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_outputs_fold_and_failures_come_first() {
    let mut w = World::new(&["web1", "web2", "web3", "db1"]).await;
    w.dead_host("down");
    let c = w.shim(&[]).await;

    // Four hosts (this machine among them) printing the same: one copy, every host named.
    let r = c
        .call(
            "run",
            json!({ "command": "echo same", "host": "local,web*" }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let hosts = hosts_of(&r);
    let names: Vec<&str> = hosts.iter().filter_map(|h| h["host"].as_str()).collect();
    assert_eq!(names, ["local", "web1", "web2", "web3"], "{}", r.text());
    let header = r.text().lines().next().unwrap_or("");
    assert!(
        header.starts_with("[hosts:4 ok:4 failed:0 parallel:8 time:"),
        "{header}"
    );
    let folded = format!(
        "--- local#{} web1#{} web2#{} web3#{} (4 hosts) [exit:0]\nsame",
        id_on(&hosts, "local"),
        id_on(&hosts, "web1"),
        id_on(&hosts, "web2"),
        id_on(&hosts, "web3")
    );
    assert_eq!(r.output(), folded, "{}", r.text());
    assert!(hosts
        .iter()
        .all(|h| h["exit_code"] == 0 && h["state"] == "exited"));

    // One host differs, one fails, one cannot be reached: the failures first, each once.
    let command = format!(
        "case ${MARK} in db1) echo different;; web3) echo broken; exit 1;; *) echo same;; esac"
    );
    let group = json!(["web1", "web2", "web3", "db1", "down"]);
    let r = c
        .call("run", json!({ "command": command, "host": group }))
        .await;
    assert!(r.is_error(), "a failed host fails the call: {}", r.text());
    let hosts = hosts_of(&r);
    let text = r.text();
    assert!(
        text.starts_with("[hosts:5 ok:3 failed:2 parallel:8 time:"),
        "{text}"
    );
    assert_eq!(line_at(text, "host web3: exit:1"), 1, "{text}");
    // The bridge's own error, its host named once.
    let down = "host down: unreachable: the bridge command `/nonexistent/bridge` was not found";
    assert_eq!(line_at(text, down), 2, "{text}");
    let broken = format!("--- web3#{} [exit:1]", id_on(&hosts, "web3"));
    let same = format!(
        "--- web1#{} web2#{} (2 hosts) [exit:0]",
        id_on(&hosts, "web1"),
        id_on(&hosts, "web2")
    );
    let different = format!("--- db1#{} [exit:0]", id_on(&hosts, "db1"));
    let (b, s, d) = (
        line_at(text, &broken),
        line_at(text, &same),
        line_at(text, &different),
    );
    assert!(
        b < s && s < d,
        "failed output first, then the group's order: {text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        [lines[b + 1], lines[s + 1], lines[d + 1]],
        ["broken", "same", "different"],
        "{text}"
    );
    assert_eq!(lines.len(), d + 2, "nothing more: {text}");
    let down = &hosts[4];
    assert_eq!(down["host"], "down");
    assert_eq!(down["state"], "unreachable", "{down}");
    assert!(down.get("id").is_none(), "nothing started there: {down}");
    assert_eq!(hosts[2]["code"], "EXIT");
    assert_eq!(hosts[2]["exit_code"], 1);

    // Each host's id is its own daemon's: status on one host reads that process.
    let id = id_on(&hosts, "db1");
    let s = c.call("status", json!({ "host": "db1", "id": id })).await;
    assert_eq!(s.output(), "different\n", "{}", s.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_hosts_run_at_once_than_host_parallel_says() {
    let mut w = World::new(&["a1", "a2", "a3"]).await;
    let c = w.shim(&[("CUBA_EXEC_HOST_PARALLEL", "1")]).await;
    let log = w.local.path().join("intervals");
    // Each host writes when its command began and ended; a tenth of a second between them
    // makes an overlap visible, were there one (nothing waits on it).
    let command = format!(
        "echo \"$(date +%s%N) begin\" >> {log}; sleep 0.1; echo \"$(date +%s%N) end\" >> {log}",
        log = log.display()
    );
    let r = c
        .call("run", json!({ "command": command, "host": "a*" }))
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert!(
        r.text()
            .starts_with("[hosts:3 ok:3 failed:0 parallel:1 time:"),
        "{}",
        r.text()
    );
    let written = fs::read_to_string(&log).expect("the intervals");
    let events: Vec<(u128, &str)> = written
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(t, what)| Some((t.parse().ok()?, what)))
        .collect();
    assert_eq!(events.len(), 6, "{written}");
    let mut sorted = events.clone();
    sorted.sort_by_key(|(t, _)| *t);
    let order: Vec<&str> = sorted.iter().map(|(_, what)| *what).collect();
    assert_eq!(
        order,
        ["begin", "end", "begin", "end", "begin", "end"],
        "one host at a time: {written}"
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_on_a_group_gives_each_host_its_id_and_listings_take_groups() {
    let mut w = World::new(&["b1", "b2"]).await;
    w.dead_host("b3");
    let c = w.shim(&[]).await;
    let command = format!("echo up-${MARK}; exec sleep 300");
    let r = c
        .call("start", json!({ "command": command, "host": "b1,b2" }))
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let hosts = hosts_of(&r);
    let text = r.text();
    assert!(
        text.starts_with("[hosts:2 ok:2 failed:0 running:2 parallel:8 time:"),
        "{text}"
    );
    let folded = format!(
        "\n--- b1#{} b2#{} (2 hosts) [state:running next:0]",
        id_on(&hosts, "b1"),
        id_on(&hosts, "b2")
    );
    assert!(text.ends_with(&folded), "{text}");
    let follow = format!(
        "\nstill running: follow one with wait(host=\"b1\", id={}, since=0)",
        id_on(&hosts, "b1")
    );
    assert!(text.contains(&follow), "{text}");
    for entry in &hosts {
        assert_eq!(entry["state"], "running", "{entry}");
        assert_eq!(entry["next"], 0, "a cursor to follow it: {entry}");
    }
    // Followed on its own host by its own id.
    let id = id_on(&hosts, "b2");
    let s = c
        .call("wait", json!({ "host": "b2", "id": id, "until": "up-" }))
        .await;
    assert_eq!(s.output(), "up-b2\n", "{}", s.text());
    assert_eq!(s.state(), "running", "{}", s.text());

    // The processes of a group, each row naming its host; a dead host is named, not fatal.
    let all = c
        .call("list_processes", json!({ "host": ["b1", "b2", "b3"] }))
        .await;
    assert!(!all.is_error(), "{}", all.text());
    let rows = all.sc()["processes"].as_array().expect("rows").clone();
    for h in ["b1", "b2"] {
        let id = id_on(&hosts, h);
        assert!(
            rows.iter().any(|r| r["host"] == h && r["id"] == id),
            "{h}: {rows:?}"
        );
    }
    assert_eq!(all.sc()["unreachable"][0]["host"], "b3", "{}", all.text());
    let some = c.rows(json!({ "host": "b?" })).await;
    assert!(some.iter().all(|r| r["host"] != "local"), "{some:?}");
    assert!(some.iter().any(|r| r["host"] == "b1"), "{some:?}");

    // list_hosts: the round trip of each reachable host.
    let r = c.call("list_hosts", json!({})).await;
    let listed = r.sc()["hosts"].as_array().expect("hosts").clone();
    for h in &listed {
        match h["reachable"].as_bool() {
            Some(true) => assert!(h["latency_ms"].is_u64(), "{h}"),
            _ => assert!(h.get("latency_ms").is_none(), "{h}"),
        }
    }
    for line in r.text().lines().filter(|l| l.contains(" ok ")) {
        assert!(line.contains(" ok latency:"), "{line}");
    }
    assert_eq!(listed.len(), 4, "local, b1, b2, b3: {}", r.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_refused_where_one_host_is_meant_or_it_names_nothing() {
    let mut w = World::new(&["c1"]).await;
    let c = w.shim(&[]).await;
    let r = c
        .call("run", json!({ "command": "echo x", "host": "c1,nosuch" }))
        .await;
    assert_eq!(r.code(), Some("BAD_REQUEST"), "{}", r.text());
    assert!(r.text().contains("unknown host \"nosuch\""), "{}", r.text());
    let r = c
        .call("start", json!({ "command": "echo x", "host": "zz*" }))
        .await;
    assert_eq!(r.code(), Some("BAD_REQUEST"), "{}", r.text());
    assert!(r.text().contains("no host matches \"zz*\""), "{}", r.text());
    let r = c
        .call("run", json!({ "command": "echo x", "host": [] }))
        .await;
    assert_eq!(r.code(), Some("BAD_REQUEST"), "{}", r.text());
    assert!(r.text().contains("empty list"), "{}", r.text());
    // Ids are per host: the tools about one id take one host.
    for (tool, host) in [
        ("status", json!("c*")),
        ("wait", json!("local,c1")),
        ("send_signal", json!(["local", "c1"])),
    ] {
        let r = c.call(tool, json!({ "host": host, "id": 1 })).await;
        assert_eq!(r.code(), Some("BAD_REQUEST"), "{tool}: {}", r.text());
        assert!(
            r.text().contains("names a group of hosts") && r.text().contains("per host"),
            "{tool}: {}",
            r.text()
        );
    }
    let r = c
        .call(
            "send_input",
            json!({ "host": "c1,local", "id": 1, "text": "x" }),
        )
        .await;
    assert_eq!(r.code(), Some("BAD_REQUEST"), "{}", r.text());
    // A one-name list is that host.
    let r = c
        .call("run", json!({ "command": "echo one", "host": ["c1"] }))
        .await;
    assert_eq!(r.output(), "one\n", "{}", r.text());
    assert_eq!(r.sc()["host"], "c1", "{}", r.text());
    c.close().await;
}
