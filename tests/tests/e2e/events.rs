//! The event log end to end: start and exit events read with a cursor, an exit pushed to a
//! follower, the log across a restart and an in-place upgrade (seq going on), the ring's bound
//! and its `lost` count, a confined caller seeing only its own processes' events, a question
//! asked and answered, waiting for input, a watched pattern, a port opened, and `cubactl
//! events --json`. Every wait is on an event, bounded.

#![allow(clippy::unwrap_used)]

use cuba_protocol::client::Client;
use cuba_protocol::{
    ApproveRequest, ClientKind, Event, EventKind, EventsRequest, NotifyRequest, ProcState, Request,
    SignalRequest,
};
use cuba_tests::{spawn, spawn_req, spawn_with, wait_exit, Step, TestDaemon};

/// Every event kept from `since` on (of process `id` if given), read batch by batch.
async fn all(c: &Client, since: Option<u64>, id: Option<u64>) -> (Vec<Event>, u64, u64) {
    let mut req = EventsRequest {
        since,
        id,
        ..EventsRequest::default()
    };
    let (mut events, mut lost) = (Vec::new(), 0);
    loop {
        let batch = c.events(req.clone()).step().await.unwrap();
        lost += batch.lost;
        let done = batch.events.is_empty();
        events.extend(batch.events);
        req.since = Some(batch.next);
        if done {
            return (events, batch.next, lost);
        }
    }
}

/// Follows the log of process `id` from the start until an event `pick` accepts comes.
async fn until(c: &Client, id: u64, pick: impl Fn(&EventKind) -> bool) -> Event {
    let req = EventsRequest {
        id: Some(id),
        ..EventsRequest::default()
    };
    let mut feed = c.follow_events(req).step().await.unwrap();
    loop {
        let batch = feed.next().step().await.unwrap().unwrap();
        if let Some(e) = batch.events.into_iter().find(|e| pick(&e.kind)) {
            return e;
        }
    }
}

fn kinds(events: &[Event], id: u64) -> Vec<&'static str> {
    events
        .iter()
        .filter(|e| e.id == Some(id))
        .map(|e| e.kind.as_str())
        .collect()
}

async fn kill(c: &Client, id: u64) {
    let req = SignalRequest {
        id,
        signal: cuba_protocol::Signal::Kill,
        escalate: false,
        grace_ms: None,
        wait: true,
    };
    c.signal(req).step().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_and_an_exit_are_events_read_from_a_cursor() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let a = spawn(&c, "exit 3").await;
    wait_exit(&c, a.id).await;
    let (events, next, lost) = all(&c, None, None).await;
    assert_eq!(lost, 0);
    assert_eq!(kinds(&events, a.id), ["started", "exited"], "{events:?}");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    match &events[1].kind {
        EventKind::Exited {
            state, exit_code, ..
        } => assert_eq!((*state, *exit_code), (ProcState::Exited, Some(3))),
        other => panic!("{other:?}"),
    }
    // From the cursor: only what came since.
    let b = spawn(&c, "true").await;
    wait_exit(&c, b.id).await;
    let (later, _, _) = all(&c, Some(next), None).await;
    assert!(later.iter().all(|e| e.id == Some(b.id)), "{later:?}");
    assert_eq!(kinds(&later, b.id), ["started", "exited"]);
    // One process's only.
    let (of_a, _, _) = all(&c, None, Some(a.id)).await;
    assert_eq!(kinds(&of_a, a.id), ["started", "exited"]);
    assert_eq!(of_a.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_is_pushed_the_exit() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let (_, next, _) = all(&c, None, None).await;
    let req = EventsRequest {
        since: Some(next),
        ..EventsRequest::default()
    };
    let mut feed = c.follow_events(req).step().await.unwrap();
    // The backlog first: empty, at the cursor asked for.
    let backlog = feed.next().step().await.unwrap().unwrap();
    assert!(
        backlog.events.is_empty() && backlog.next == next,
        "{backlog:?}"
    );
    spawn(&c, "true").await;
    let mut seen = Vec::new();
    while !seen.contains(&"exited") {
        let batch = feed.next().step().await.unwrap().unwrap();
        seen.extend(batch.events.iter().map(|e| e.kind.as_str()));
    }
    assert_eq!(seen, ["started", "exited"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_survives_a_restart_and_an_upgrade_and_seq_goes_on() {
    let mut d = TestDaemon::start().await;
    let c = d.client().await;
    let a = spawn(&c, "echo one").await;
    wait_exit(&c, a.id).await;
    let (before, next, _) = all(&c, None, None).await;
    d.restart().await;
    let c = d.client().await;
    let (after, _, _) = all(&c, None, None).await;
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "kept across the restart"
    );
    let b = spawn(&c, "echo two").await;
    wait_exit(&c, b.id).await;
    let (new, next2, _) = all(&c, Some(next), None).await;
    assert!(new.iter().all(|e| e.seq >= next), "{new:?}");
    assert_eq!(kinds(&new, b.id), ["started", "exited"]);

    // A running process across an upgrade: its exit comes after, in the same log.
    let running = spawn(&c, "read line").await;
    let up = d
        .cubactl(&["daemon", "upgrade"])
        .output()
        .step()
        .await
        .unwrap();
    assert!(up.status.success(), "{up:?}");
    let c = d.client().await;
    c.stdin(running.id, Vec::new(), true).step().await.unwrap();
    let exit = until(&c, running.id, |k| matches!(k, EventKind::Exited { .. })).await;
    assert!(exit.seq > next2, "{exit:?} after {next2}");
    let (whole, _, _) = all(&c, None, None).await;
    assert_eq!(
        &whole[..before.len()],
        &before[..],
        "kept across the upgrade"
    );
    // (It may have been seen waiting for input in between.)
    let of_it = kinds(&whole, running.id);
    assert_eq!(of_it.first(), Some(&"started"), "{of_it:?}");
    assert_eq!(of_it.last(), Some(&"exited"), "{of_it:?}");
    let seqs: Vec<u64> = whole.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ring_keeps_its_bound_and_says_what_was_lost() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_EVENTS_KEEP", "4")
        .start()
        .await;
    let c = d.client().await;
    for _ in 0..3 {
        let p = spawn(&c, "true").await;
        wait_exit(&c, p.id).await;
    }
    let (events, next, lost) = all(&c, Some(1), None).await;
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!((lost, next), (2, 7));
    assert_eq!(events[0].seq, 3);
    // Without a cursor: what is kept, nothing said lost.
    assert_eq!(all(&c, None, None).await.2, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_caller_sees_only_its_own_processes_events() {
    let d = TestDaemon::start().await;
    let person = d.client().await;
    let allow = ("CUBA_EXEC_ALLOWED_COMMANDS", "echo,true");
    let agent = cuba_tests::client_with(&d, ClientKind::Mcp, "agent", &[allow]).await;
    let other = cuba_tests::client_with(&d, ClientKind::Mcp, "other", &[allow]).await;
    let theirs = spawn(&person, "echo persons").await;
    wait_exit(&person, theirs.id).await;
    let own = spawn(&agent, "echo agents").await;
    wait_exit(&agent, own.id).await;
    let (seen, _, _) = all(&agent, None, None).await;
    assert!(seen.iter().all(|e| e.id == Some(own.id)), "{seen:?}");
    assert_eq!(kinds(&seen, own.id), ["started", "exited"]);
    assert!(all(&agent, None, Some(theirs.id)).await.0.is_empty());
    assert!(all(&other, None, None).await.0.is_empty());
    let (everything, _, _) = all(&person, None, None).await;
    assert_eq!(kinds(&everything, theirs.id), ["started", "exited"]);
    assert_eq!(kinds(&everything, own.id), ["started", "exited"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_and_answered_are_events() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_ASK_COMMANDS", "touch *")
        .start()
        .await;
    let c = d.client_named("person").await;
    let file = d.dir().join("asked");
    let p = spawn(&c, &format!("touch '{}'", file.display())).await;
    let raised = until(&c, p.id, |k| matches!(k, EventKind::AskRaised { .. })).await;
    let EventKind::AskRaised { ask, what, .. } = raised.kind else {
        unreachable!()
    };
    assert!(what.contains("touch"), "{what}");
    let req = ApproveRequest {
        id: p.id,
        ask: None,
        always: false,
        dir: None,
    };
    c.call(Request::Approve(req)).step().await.unwrap();
    let answered = until(&c, p.id, |k| matches!(k, EventKind::AskAnswered { .. })).await;
    match answered.kind {
        EventKind::AskAnswered {
            ask: a,
            approved,
            by,
        } => {
            assert_eq!((a, approved), (ask, true));
            // The person who answered, as the audit names them (here, the user).
            assert!(!by.is_empty() && by != "nobody", "{by}");
        }
        other => panic!("{other:?}"),
    }
    assert!(answered.seq > raised.seq);
    wait_exit(&c, p.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_input_is_an_event_with_its_prompt() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "printf 'Continue? [y/N] '; read answer").await;
    let waiting = until(&c, p.id, |k| matches!(k, EventKind::WaitingInput { .. })).await;
    match waiting.kind {
        EventKind::WaitingInput { prompt } => assert_eq!(prompt, "Continue? [y/N]"),
        other => panic!("{other:?}"),
    }
    kill(&c, p.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_pattern_reports_each_matching_line() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(
        &c,
        "read go; echo \"ready $go\"; echo unrelated; echo 'ready again'",
    )
    .await;
    let req = NotifyRequest {
        id: p.id,
        pattern: "^ready".into(),
    };
    c.notify(req).step().await.unwrap();
    let bad = NotifyRequest {
        id: p.id,
        pattern: "(".into(),
    };
    assert!(c.notify(bad).step().await.is_err(), "an invalid regex");
    c.stdin(p.id, b"now\n".to_vec(), true).step().await.unwrap();
    wait_exit(&c, p.id).await;
    let mut lines = Vec::new();
    while lines.len() < 2 {
        let matched = until(
            &c,
            p.id,
            |k| matches!(k, EventKind::Matched { line, .. } if !lines.contains(line)),
        )
        .await;
        if let EventKind::Matched { line, .. } = matched.kind {
            lines.push(line);
        }
    }
    assert_eq!(lines, ["ready now", "ready again"]);
    // Ended: nothing to watch.
    let late = NotifyRequest {
        id: p.id,
        pattern: "x".into(),
    };
    assert!(c.notify(late).step().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(target_os = "linux"), ignore = "ports are reported on Linux only")]
async fn a_port_opened_by_a_tree_is_an_event() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let listener = "import socket, sys, time\n\
                    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
                    print(s.getsockname()[1], flush=True); time.sleep(60)";
    let p = spawn_with(&c, spawn_req(&format!("python3 -c \"{listener}\""))).await;
    let port: u16 = cuba_tests::wait_match(&c, p.id, r"^\d+")
        .await
        .trim()
        .parse()
        .unwrap();
    let opened = until(&c, p.id, |k| matches!(k, EventKind::PortOpened { .. })).await;
    assert!(
        matches!(opened.kind, EventKind::PortOpened { port: q } if q == port),
        "{opened:?} for {port}"
    );
    kill(&c, p.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_events_json_prints_one_object_per_event() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn_with(
        &c,
        cuba_protocol::SpawnRequest {
            name: Some("greeter".into()),
            ..spawn_req("exit 4")
        },
    )
    .await;
    wait_exit(&c, p.id).await;
    let id = p.id.to_string();
    let out = d
        .cubactl(&["events", "--json", "--id", &id])
        .output()
        .step()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["event"], "started");
    assert_eq!(lines[0]["command"], "exit 4");
    assert_eq!(lines[0]["name"], "greeter");
    assert_eq!(lines[1]["event"], "exited");
    assert_eq!(lines[1]["exit_code"], 4);
    assert_eq!(lines[1]["id"], p.id);
    // For a person: one line each, naming the process.
    let out = d.cubactl(&["events"]).output().step().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("{id} (greeter)")), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_events_match_watches_a_pattern_and_follows_its_matches() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "read go; echo \"build error: $go\"; echo fine").await;
    let id = p.id.to_string();
    let mut follow = d.cubactl(&["events", "-f", "--json", "--id", &id, "--match", "error"]);
    let mut follow = follow.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let stdout = follow.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    // The pattern is registered before the log is read: its backlog's `started` proves it.
    let first = lines.next_line().step().await.unwrap().unwrap();
    assert!(first.contains("\"started\""), "{first}");
    c.stdin(p.id, b"E0425\n".to_vec(), true)
        .step()
        .await
        .unwrap();
    let matched = loop {
        let line = lines
            .next_line()
            .step()
            .await
            .unwrap()
            .expect("events ended");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["event"] == "matched" {
            break v;
        }
    };
    assert_eq!(matched["line"], "build error: E0425");
    assert_eq!(matched["pattern"], "error");
    // --match needs a process.
    let out = d
        .cubactl(&["events", "--match", "x"])
        .output()
        .step()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--id"));
    let _ = follow.kill().await;
}
