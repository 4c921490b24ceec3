//! The table as clients see it: names (a second running command of a name is started and told
//! so; `Ensure` finds the first), `List` rows and filters, `DaemonStatus`, and the audit log's
//! lines for a spawn and its end.

use cuba_protocol::{ClientKind, ListRequest, ProcState, Signal, SignalRequest, PROTOCOL_VERSION};

use crate::fixture::{bounded, spawn, spawn_running, wait_exit, Daemon, CLIENT};
use crate::os::text;

fn named(d: &Daemon, text: &str, name: &str) -> cuba_protocol::SpawnRequest {
    let mut r = d.req(text);
    r.name = Some(name.into());
    r
}

async fn kill(c: &cuba_protocol::client::Client, id: u64) {
    let req = SignalRequest {
        id,
        signal: Signal::Kill,
        escalate: false,
        grace_ms: None,
        wait: true,
    };
    let row = bounded("kill", c.signal(req)).await.unwrap();
    assert!(row.state.is_finished(), "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_command_of_a_running_name_starts_with_a_notice_and_ensure_finds_the_first() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let first = spawn_running(&c, named(&d, &text::long(), "web")).await;
    assert_eq!(first.notice, None, "{first:?}");
    // Names are labels: a namesake is started, and told of the other (docs: `start` with
    // `ensure` returns that one instead).
    let second = spawn_running(&c, named(&d, &text::long(), "web")).await;
    assert_ne!(second.id, first.id);
    let notice = second.notice.clone().unwrap_or_default();
    let told = format!("process {} is also named web and still running", first.id);
    assert!(notice.contains(&told), "{second:?}");
    // `Ensure` with that name and command finds a running one and starts nothing.
    let (found, existing) = bounded("ensure", c.ensure(named(&d, &text::long(), "web")))
        .await
        .unwrap();
    assert!(
        existing && [first.id, second.id].contains(&found.id),
        "{found:?}"
    );
    // With another command, it starts one.
    let (other, existing) = bounded("ensure", c.ensure(named(&d, &text::echo("x"), "web")))
        .await
        .unwrap();
    assert!(!existing && other.id > second.id, "{other:?}");
    let by_name = ListRequest {
        name: Some("web".into()),
        ..ListRequest::default()
    };
    let rows = bounded("list", c.list(by_name)).await.unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for id in [first.id, second.id] {
        kill(&c, id).await;
    }
    wait_exit(&c, other.id).await;
    // No namesake runs now: no notice.
    let third = spawn(&c, named(&d, &text::echo("y"), "web")).await;
    assert_eq!(third.notice, None, "{third:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_status_rows_describe_the_table() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let done = spawn(&c, named(&d, &text::exit(5), "done")).await;
    wait_exit(&c, done.id).await;
    let running = spawn_running(&c, named(&d, &text::long(), "running")).await;
    let all = bounded("list", c.list(ListRequest::default()))
        .await
        .unwrap();
    let ids: Vec<u64> = all.iter().map(|p| p.id).collect();
    assert!(
        ids.contains(&done.id) && ids.contains(&running.id),
        "{all:?}"
    );
    assert_eq!(all.len(), 2, "{all:?}");
    for p in &all {
        assert_eq!(p.owner.name, CLIENT);
        assert_eq!(p.owner.kind, ClientKind::Other);
        assert_eq!(p.owner.pid, std::process::id());
        assert!(p.started_at_ms > 0 && p.pid > 0, "{p:?}");
    }
    let row = all.iter().find(|p| p.id == done.id).unwrap();
    assert_eq!((row.state, row.exit_code), (ProcState::Exited, Some(5)));
    assert_eq!(row.name.as_deref(), Some("done"));
    assert_eq!(row.command, text::exit(5));
    let row = all.iter().find(|p| p.id == running.id).unwrap();
    assert!(
        !row.state.is_finished() && row.ended_at_ms.is_none(),
        "{row:?}"
    );
    // Filters: by state, by owner, and a bound on finished rows that counts what it hides.
    // (`running`, or on Windows possibly `waiting_input`: its `cmd` waits on a read.)
    let only_running = ListRequest {
        state: Some(row.state),
        ..ListRequest::default()
    };
    let rows = bounded("list", c.list(only_running)).await.unwrap();
    assert_eq!(rows.iter().map(|p| p.id).collect::<Vec<_>>(), [running.id]);
    let nobody = ListRequest {
        owner: Some("nobody-of-this-test".into()),
        ..ListRequest::default()
    };
    assert!(bounded("list", c.list(nobody)).await.unwrap().is_empty());
    let no_finished = ListRequest {
        finished: Some(0),
        ..ListRequest::default()
    };
    let listing = bounded("list", c.listing(no_finished)).await.unwrap();
    assert_eq!(listing.processes.len(), 1, "{listing:?}");
    assert_eq!(listing.hidden, 1, "{listing:?}");

    let s = bounded("status", c.status()).await.unwrap();
    assert_eq!(s.pid, d.pid());
    assert_eq!(s.protocol_version, PROTOCOL_VERSION);
    assert_eq!(s.os, std::env::consts::OS);
    assert_eq!((s.running, s.total), (1, 2), "{s:?}");
    assert!(s.clients >= 1, "{s:?}");
    assert_eq!(s.socket, d.socket().display().to_string());
    assert!(s.state_dir.ends_with("state"), "{s:?}");
    assert_eq!(s.upgrades, 0);
    // What this OS's daemon lacks is said, on Windows only (`platform/capability.rs`).
    let lacks = "not offered on windows: shell sessions, in-place upgrades, password asks.";
    let said = s.notices.iter().any(|n| n == lacks);
    assert_eq!(said, cfg!(windows), "{:?}", s.notices);
    // The default shell: `sh`; on Windows PowerShell where it runs, else `cmd.exe`.
    let shells: &[&str] = match cfg!(windows) {
        true => &["pwsh.exe", "powershell.exe", "cmd.exe"],
        false => &["/bin/sh"],
    };
    assert!(shells.contains(&s.shell.as_str()), "{s:?}");
    kill(&c, running.id).await;
}

/// The audit log's lines (`<state dir>/audit.jsonl`) about process `id`.
fn audit_lines(d: &Daemon, id: u64) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("an audit line is JSON"))
        .filter(|v| v["id"] == id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_and_its_end_are_audited() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let command = text::both_streams("audited", "too", 6);
    let p = spawn(&c, d.req(&command)).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(6));
    let lines = audit_lines(&d, p.id);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (start, end) = (&lines[0], &lines[1]);
    for line in [start, end] {
        assert_eq!(line["command"], command.as_str());
        assert_eq!(line["client"], CLIENT);
        assert_eq!(line["client_kind"], "other");
        assert_eq!(line["client_pid"], std::process::id());
        // The transport's word on the peer: this test process.
        assert_eq!(line["peer_pid"], std::process::id(), "{line}");
        assert_eq!(line["decision"], "allowed");
        assert_eq!(line["pid"], p.pid);
        assert!(line["ts"].as_u64().is_some_and(|t| t > 0), "{line}");
    }
    assert_eq!(
        (start["event"].as_str(), start["state"].as_str()),
        (Some("spawn"), Some("running"))
    );
    assert_eq!(end["event"], "end");
    assert_eq!(
        (end["state"].as_str(), end["exit"].as_i64()),
        (Some("exited"), Some(6))
    );
    assert!(end["duration_ms"].as_u64().is_some(), "{end}");
}
