//! Budgets per agent through the real `cuba-exec` binary: each MCP client's commands are held
//! by its own budget (`agent_cpu`, `agent_pids`), a command cannot leave it by starting another
//! through `cubactl` or in a new session, and a budget reached is said in the tool's reply and in
//! `list_processes`. The hit is waited for on the event log, not polled.

use crate::common;

use common::mcp::binary;
use common::TestDir;
use cuba_protocol::client::{this_client, Client};
use cuba_protocol::{ClientKind, EventKind, EventsRequest};
use serde_json::json;

fn agent_lines(cgroups: &str) -> Vec<&str> {
    cgroups.lines().filter(|l| l.contains("/agent.")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_commands_stay_in_its_budget_and_reaching_it_is_said() {
    if cuba_tests::machine::writable_cgroup_v2().is_none() {
        cuba_tests::machine::skip("budgets through MCP", "no writable cgroup v2 tree here");
        return;
    }
    let set = [
        ("CUBA_EXEC_CGROUPS", "on"),
        ("CUBA_EXEC_AGENT_CPU", "0.25"),
        ("CUBA_EXEC_AGENT_PIDS", "64"),
    ];
    let mut t = TestDir::with_daemon_env(&set).await;
    let c = binary(&mut t, "budgeted-agent", &[]).await;
    let other = binary(&mut t, "other-agent", &[]).await;
    let ctl = format!(
        "'{}' --socket '{}'",
        cuba_tests::bin("cubactl").display(),
        t.socket().display()
    );
    // The model's command tries to leave its budget: through cubactl (a person's client, no
    // budget of its own) and in a new session.
    let r = c
        .call(
            "run",
            json!({"command": format!(
                "cat /proc/self/cgroup; echo ---; {ctl} run -- cat /proc/self/cgroup; \
                 echo ---; setsid sh -c 'cat /proc/self/cgroup'"
            )}),
        )
        .await;
    let out = r.output();
    let parts: Vec<&str> = out.split("---").collect();
    assert_eq!(parts.len(), 3, "{}", r.text());
    for part in parts {
        let lines = agent_lines(part);
        assert!(
            !lines.is_empty(),
            "outside its agent's cgroup: {}",
            r.text()
        );
        assert!(
            lines.iter().all(|l| l.contains("/agent.budgeted-agent")),
            "{}",
            r.text()
        );
    }
    // Another client is an agent of its own.
    let r = other
        .call("run", json!({"command": "cat /proc/self/cgroup"}))
        .await;
    let lines = agent_lines(r.output()).join("\n");
    assert!(lines.contains("/agent.other-agent"), "{}", r.text());
    // A busy loop reaches the CPU budget: an event, then said in the reply and the listing.
    let direct = Client::connect(&t.socket(), this_client(ClientKind::Other, "watcher"))
        .await
        .expect("connect");
    let mut feed = direct
        .follow_events(EventsRequest::default())
        .await
        .expect("follow the event log");
    let hog = c.start("while :; do :; done").await.id();
    loop {
        let batch = common::bounded("a budget event", common::STEP, feed.next())
            .await
            .expect("the feed ended")
            .expect("a batch");
        let hit = batch.events.iter().any(|e| {
            matches!(&e.kind, EventKind::LimitHit { limit, detail }
                if limit == "budget" && detail.contains("agent budgeted-agent"))
        });
        if hit {
            break;
        }
    }
    let r = c.call("status", json!({"id": hog})).await;
    assert!(
        r.text()
            .contains("budget: the cpu budget of agent budgeted-agent (0.25 cores) was reached"),
        "{}",
        r.text()
    );
    let r = c.call("list_processes", json!({})).await;
    assert!(
        r.text().contains("budget budgeted-agent: cpu ") && r.text().contains("/0.25"),
        "{}",
        r.text()
    );
    c.call("send_signal", json!({"id": hog, "signal": "KILL"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_shows_a_few_agents_budgets_however_many_run() {
    if cuba_tests::machine::writable_cgroup_v2().is_none() {
        cuba_tests::machine::skip("budgets through MCP", "no writable cgroup v2 tree here");
        return;
    }
    let set = [("CUBA_EXEC_CGROUPS", "on"), ("CUBA_EXEC_AGENT_PIDS", "64")];
    let mut t = TestDir::with_daemon_env(&set).await;
    let mut clients = Vec::new();
    for i in 0..6 {
        let c = binary(&mut t, &format!("many-{i}"), &[]).await;
        c.start("sleep 120").await;
        clients.push(c);
    }
    let r = clients[5].call("list_processes", json!({})).await;
    let lines: Vec<&str> = r
        .text()
        .lines()
        .filter(|l| l.starts_with("budget "))
        .collect();
    assert_eq!(lines.len(), 4, "{}", r.text());
    assert!(
        lines[0].starts_with("budget many-5: "),
        "its own first: {}",
        r.text()
    );
    assert!(
        r.text()
            .contains("2 more agents' budgets: `cubactl ps` shows them."),
        "{}",
        r.text()
    );
}
