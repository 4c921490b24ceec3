//! The byte budgets an agent pays for (`../shared/DESIGN.md` §10), through the real binary: the
//! tools/list result with and without configured hosts, the server's instructions, a
//! `list_processes` reply however many commands ran, and the reply of a short command. Bytes
//! are deterministic, so these are tests; the times are in `benches/mcp.rs`.

use crate::common;

use common::mcp::{binary, Mcp};
use common::TestDir;
use serde_json::{json, Value};

/// Every tool together, as the JSON of the tools/list result.
const TOOLS_LIST: usize = 8 * 1024;
/// The server's instructions, which the model reads once per conversation too.
const INSTRUCTIONS: usize = 1024;
/// A `list_processes` reply (text and structured content together) with nothing running.
const LISTING: usize = 2 * 1024;
/// The text of a short command's reply beyond its output.
const SHORT_REPLY: usize = 60;

/// An empty settings file, so that no host comes from the user's own.
fn no_config(t: &TestDir) -> String {
    let none = t.path().join("none.toml");
    std::fs::write(&none, "").expect("an empty config");
    none.display().to_string()
}

/// The bytes of the tools/list result and of the instructions of a shim started with `set`.
async fn sizes(t: &mut TestDir, set: &[(&str, &str)]) -> (usize, usize, Vec<String>) {
    let c = binary(t, "budget", set).await;
    let tools = common::bounded("tools/list", common::STEP, c.service.list_all_tools())
        .await
        .expect("tools/list failed");
    let names = tools.iter().map(|t| t.name.to_string()).collect();
    let bytes = serde_json::to_vec(&json!({ "tools": tools }))
        .expect("tools serialize")
        .len();
    // A budget met by sending nothing would be no budget: the instructions must be there.
    let instructions = c
        .service
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .filter(|i| !i.trim().is_empty())
        .expect("the server sent no instructions")
        .len();
    c.close().await;
    (bytes, instructions, names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_fits_eight_kilobytes_with_hosts_or_without() {
    let mut t = TestDir::with_daemon().await;
    // No hosts: no `host` arguments and no list_hosts, which could name nothing.
    let none = no_config(&t);
    let (bytes, instructions, names) = sizes(&mut t, &[("CUBA_EXEC_CONFIG", &none)]).await;
    assert!(
        bytes <= TOOLS_LIST,
        "tools/list without hosts: {bytes} bytes"
    );
    assert!(
        instructions <= INSTRUCTIONS,
        "instructions: {instructions} bytes"
    );
    assert_eq!(names.len(), 7, "{names:?}");
    assert!(!names.iter().any(|n| n == "list_hosts"), "{names:?}");

    let hosts = [
        ("CUBA_EXEC_CONFIG", none.as_str()),
        ("CUBA_EXEC_HOSTS", "build=ssh:me@build"),
    ];
    let (bytes, instructions, names) = sizes(&mut t, &hosts).await;
    assert!(bytes <= TOOLS_LIST, "tools/list with a host: {bytes} bytes");
    assert!(
        instructions <= INSTRUCTIONS,
        "instructions: {instructions} bytes"
    );
    assert!(names.iter().any(|n| n == "list_hosts"), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_arguments_are_offered_only_where_hosts_are_configured() {
    let mut t = TestDir::with_daemon().await;
    let none = no_config(&t);
    for (hosts, offered) in [(None, false), (Some("build=ssh:me@build"), true)] {
        let mut set = vec![("CUBA_EXEC_CONFIG", none.as_str())];
        set.extend(hosts.map(|h| ("CUBA_EXEC_HOSTS", h)));
        let c = binary(&mut t, "hosts", &set).await;
        let tools = common::bounded("tools/list", common::STEP, c.service.list_all_tools())
            .await
            .expect("tools/list failed");
        for tool in &tools {
            let has = tool
                .input_schema
                .get("properties")
                .and_then(|p| p.get("host"))
                .is_some();
            let wants = offered && tool.name != "list_hosts";
            assert_eq!(
                has, wants,
                "{}: host offered with hosts {hosts:?}",
                tool.name
            );
        }
        // Refused or not, a host is never silently taken for this machine.
        let r = c
            .call("run", json!({ "command": "echo x", "host": "nosuch" }))
            .await;
        assert!(r.is_error(), "{}", r.text());
        assert!(r.text().contains("unknown host \"nosuch\""), "{}", r.text());
        c.close().await;
    }
}

/// The text and structured bytes of `r`.
fn reply_bytes(r: &common::mcp::Reply) -> usize {
    let structured = serde_json::to_vec(r.sc())
        .expect("structured content")
        .len();
    r.text().len() + structured
}

async fn run_true(c: &Mcp, n: usize) {
    for _ in 0..n {
        let r = c.call("run", json!({ "command": "true" })).await;
        assert!(!r.is_error(), "{}", r.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_processes_stays_small_however_many_commands_ran() {
    let mut t = TestDir::with_daemon().await;
    let c = binary(&mut t, "lister", &[]).await;
    let svc = c
        .call("start", json!({ "command": "sleep 60", "name": "svc" }))
        .await;
    assert!(!svc.is_error(), "{}", svc.text());
    run_true(&c, 200).await;

    let r = c.call("list_processes", json!({})).await;
    assert!(!r.is_error(), "{}", r.text());
    let rows = r.sc()["processes"].as_array().expect("rows").clone();
    // The running one in full, the five newest finished ones, a count of the rest.
    assert_eq!(rows.len(), 6, "{}", r.text());
    assert!(rows.iter().any(|row| row["id"] == svc.sc()["id"]));
    assert_eq!(r.u64("hidden"), 195, "{}", r.text());
    let first = r.text().lines().next().unwrap_or("");
    assert_eq!(first, "[processes:6 hidden:195]", "{}", r.text());
    assert!(
        r.text().contains("195 older finished not shown"),
        "{}",
        r.text()
    );
    let bytes = reply_bytes(&r);
    assert!(
        bytes <= LISTING,
        "list_processes after 200 commands: {bytes} bytes"
    );
    // Finished rows are the newest ones, in id order like the rest.
    let ids: Vec<u64> = rows.iter().filter_map(|r| r["id"].as_u64()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted);
    let newest = c.call("run", json!({ "command": "true" })).await.id();
    let rows = c.rows(json!({})).await;
    assert_eq!(rows.last().and_then(|r| r["id"].as_u64()), Some(newest));

    // limit and the filters.
    let r = c.call("list_processes", json!({ "limit": 50 })).await;
    assert_eq!(r.sc()["processes"].as_array().map(Vec::len), Some(51));
    assert_eq!(r.u64("hidden"), 151);
    assert_eq!(c.rows(json!({ "name": "svc" })).await.len(), 1);
    assert!(c.rows(json!({ "name": "nosuch" })).await.is_empty());
    let r = c
        .call("list_processes", json!({ "state": "exited", "limit": 2 }))
        .await;
    assert_eq!(r.sc()["processes"].as_array().map(Vec::len), Some(2));
    assert_eq!(r.u64("hidden"), 199);
    let r = c
        .call("list_processes", json!({ "state": "running" }))
        .await;
    assert_eq!(r.sc()["processes"].as_array().map(Vec::len), Some(1));
    assert_eq!(r.u64("hidden"), 0);
    assert!(!r.text().contains("not shown"), "{}", r.text());
    assert!(c.rows(json!({ "owner": "nobody" })).await.is_empty());
    let r = c.call("list_processes", json!({ "limit": 0 })).await;
    assert_eq!(r.sc()["processes"].as_array().map(Vec::len), Some(1));
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_processes_shows_the_newest_fifty_running_and_counts_the_rest() {
    let mut t = TestDir::with_daemon_env(&[("CUBA_EXEC_MAX_PROCS", "60")]).await;
    let c = binary(&mut t, "many", &[]).await;
    let starts = (0..53).map(|_| c.call("start", json!({ "command": "sleep 60" })));
    let mut ids: Vec<u64> = futures_util::future::join_all(starts)
        .await
        .iter()
        .map(|r| {
            assert!(!r.is_error(), "{}", r.text());
            r.id()
        })
        .collect();
    ids.sort_unstable();

    let r = c.call("list_processes", json!({})).await;
    let shown: Vec<u64> = r.sc()["processes"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["id"].as_u64())
        .collect();
    // The newest fifty, in id order; the three oldest counted, with the way to them.
    assert_eq!(shown, ids[3..], "{}", r.text());
    assert_eq!(r.u64("hidden_running"), 3, "{}", r.text());
    let first = r.text().lines().next().unwrap_or("").to_string();
    assert_eq!(first, "[processes:50 running_hidden:3]", "{}", r.text());
    assert!(
        r.text().contains("3 older running not shown"),
        "{}",
        r.text()
    );
    let bytes = reply_bytes(&r);
    assert!(bytes <= 50 * 400, "fifty running rows: {bytes} bytes");
    // A state filter is bounded the same way; a larger limit shows them all.
    let r = c
        .call("list_processes", json!({ "state": "running" }))
        .await;
    assert_eq!(r.u64("hidden_running"), 3, "{}", r.text());
    let r = c.call("list_processes", json!({ "limit": 60 })).await;
    assert_eq!(r.sc()["processes"].as_array().map(Vec::len), Some(53));
    assert_eq!(r.u64("hidden_running"), 0, "{}", r.text());
    // The oldest, not shown by default, is still reachable by id.
    let oldest = c.call("status", json!({ "id": ids[0] })).await;
    assert!(oldest.text().contains("running"), "{}", oldest.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_commands_reply_is_its_output_and_one_header_line() {
    let mut t = TestDir::with_daemon().await;
    let c = binary(&mut t, "short", &[]).await;
    let r = c.call("run", json!({ "command": "echo hi" })).await;
    assert_eq!(r.output(), "hi\n", "{}", r.text());
    let beyond = r.text().len() - "hi\n".len();
    assert!(
        beyond <= SHORT_REPLY,
        "{beyond} bytes beyond the output: {:?}",
        r.text()
    );
    // Fields that say nothing are left out of the structured content too.
    let sc = r.sc().as_object().expect("an object");
    let keys: Vec<&str> = sc.keys().map(String::as_str).collect();
    for absent in ["truncated", "dropped", "hint", "error", "code"] {
        assert!(!keys.contains(&absent), "{absent} in {}", r.sc());
    }
    let _: &Value = &r.sc()["next"];
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_content_is_the_documented_shape() {
    use cuba_tests::json_doc;
    let mut t = TestDir::with_daemon().await;
    let none = no_config(&t);
    let c = binary(&mut t, "json", &[("CUBA_EXEC_CONFIG", &none)]).await;
    // The process fields docs/json.md gives MCP, and the output view beside them.
    let mut known = json_doc::names(false);
    for view in [
        "next",
        "output",
        "truncated",
        "dropped",
        "code",
        "hint",
        "wait",
        "matched",
        "existing",
        "screen",
    ] {
        known.insert(view.to_string());
    }
    let svc = c
        .call("start", json!({ "command": "sleep 60", "name": "svc" }))
        .await;
    json_doc::assert_documented(svc.sc(), &known, "start");
    let ran = c.call("run", json!({ "command": "echo hi; exit 3" })).await;
    json_doc::assert_documented(ran.sc(), &known, "run");
    assert_eq!(ran.sc()["state"], "exited");
    let stopped = c
        .call("send_signal", json!({ "id": svc.id(), "signal": "TERM" }))
        .await;
    json_doc::assert_documented(stopped.sc(), &known, "send_signal");
    let listed = c.call("list_processes", json!({})).await;
    for row in listed.sc()["processes"].as_array().expect("rows") {
        json_doc::assert_documented(row, &known, "list_processes");
    }
    c.close().await;
}
