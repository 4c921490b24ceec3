//! Confined callers: a client whose own settings narrow what it may run or where (as a narrowed
//! HTTP token's do) reaches only the records it started — listing, reading, waiting, typing,
//! signalling, resizing, pruning, `ensure`, shell sessions — and so does every command of its
//! trees, through `cubactl` or the socket; an id it does not reach is answered as one that does
//! not exist. Input and signals are held to the check a start is. All of it across a restart.

#![allow(clippy::unwrap_used)]

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{
    ClientKind, ErrorKind, ListRequest, ReadRequest, Request, Response, SignalRequest,
    SpawnRequest, StdinRequest, StreamFilter, WaitRequest, WaitSpec,
};
use cuba_tests::http::HttpServer;
use cuba_tests::{bounded, spawn_req, spawn_with, text, wait_exit, TestDaemon, STEP};
use serde_json::json;

/// A connection named `name` whose only `CUBA_EXEC_*` variables are `vars`.
async fn client_with(d: &TestDaemon, name: &str, vars: &[(&str, &str)]) -> Client {
    cuba_tests::client_with(d, ClientKind::Mcp, name, vars).await
}

/// A client confined by its allowed commands.
async fn confined(d: &TestDaemon, name: &str) -> Client {
    let allow = (
        "CUBA_EXEC_ALLOWED_COMMANDS",
        "echo,sleep,cat,sh,true,cubactl",
    );
    client_with(d, name, &[allow]).await
}

fn ids(c: &Response) -> Vec<u64> {
    match c {
        Response::List(l) => l.processes.iter().map(|p| p.id).collect(),
        other => panic!("not a listing: {other:?}"),
    }
}

async fn listed(c: &Client) -> Vec<u64> {
    let all = ListRequest {
        finished: Some(1000),
        ..ListRequest::default()
    };
    ids(&bounded("list", STEP, c.call(Request::List(all)))
        .await
        .unwrap())
}

/// The error `c` gets for `request`.
async fn refused(c: &Client, request: Request) -> ClientError {
    let what = format!("{request:?}");
    bounded("call", STEP, c.call(request))
        .await
        .expect_err(&what)
}

/// Every request about process `id`, each answered as for an id that does not exist.
async fn assert_unreachable(c: &Client, id: u64) {
    let missing = refused(c, Request::Info(cuba_protocol::IdRequest { id: 999_999 })).await;
    let requests = [
        Request::Info(cuba_protocol::IdRequest { id }),
        Request::Read(ReadRequest {
            id,
            since: None,
            max_bytes: 4096,
            stream: StreamFilter::Both,
        }),
        Request::Wait(WaitRequest {
            id,
            since: None,
            spec: WaitSpec::exit(100, 4096),
        }),
        Request::Stdin(StdinRequest {
            id,
            data: b"id\n".to_vec(),
            eof: false,
            token: None,
        }),
        Request::Signal(SignalRequest {
            id,
            signal: cuba_protocol::Signal::Kill,
            escalate: false,
            grace_ms: None,
            wait: false,
        }),
        Request::Screen(cuba_protocol::IdRequest { id }),
        Request::Resize(cuba_protocol::ResizeRequest {
            id,
            size: cuba_protocol::TtySize { cols: 80, rows: 24 },
        }),
    ];
    for r in requests {
        let what = format!("{r:?}");
        let e = refused(c, r).await;
        assert_eq!(e.kind(), Some(ErrorKind::NotFound), "{what}: {e}");
        let (got, none) = (e.to_string(), missing.to_string());
        assert_eq!(
            got.replace(&id.to_string(), "N"),
            none.replace("999999", "N"),
            "told apart from a missing id: {what}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_client_reaches_only_what_it_started() {
    let mut d = TestDaemon::start().await;
    let person = d.client().await;
    let agent = confined(&d, "agent").await;
    let other = confined(&d, "other").await;

    // The person's shell, reading what it is sent; a finished record of theirs.
    let shell = spawn_with(&person, spawn_req("read line; echo \"got $line\"")).await;
    let done = spawn_with(&person, spawn_req("echo persons-secret")).await;
    wait_exit(&person, done.id).await;
    let named = spawn_with(
        &person,
        SpawnRequest {
            name: Some("web".into()),
            ..spawn_req("sleep 30")
        },
    )
    .await;
    let own = spawn_with(&agent, spawn_req("echo agents-own")).await;
    wait_exit(&agent, own.id).await;

    // The agent lists, reads and waits on its own; the person sees both; the other sees none.
    assert_eq!(listed(&agent).await, [own.id]);
    assert!(listed(&other).await.is_empty());
    let all = listed(&person).await;
    for id in [shell.id, done.id, named.id, own.id] {
        assert!(all.contains(&id), "{all:?} lacks {id}");
    }
    let mut watch = agent
        .subscribe(Request::WatchTable(ListRequest::default()))
        .await
        .unwrap();
    match bounded("watch", STEP, watch.next()).await.unwrap().unwrap() {
        r @ Response::List(_) => assert_eq!(ids(&r), [own.id]),
        other => panic!("{other:?}"),
    }
    for id in [shell.id, done.id, named.id] {
        assert_unreachable(&agent, id).await;
    }
    assert_unreachable(&other, own.id).await;

    // `ensure` of the person's name starts the agent's own, never hands over theirs.
    let ensured = agent
        .call(Request::Ensure(SpawnRequest {
            name: Some("web".into()),
            ..spawn_req("sleep 30")
        }))
        .await
        .unwrap();
    let Response::Process(mine) = ensured else {
        panic!("a new process, not the person's: {ensured:?}");
    };
    assert_ne!(mine.id, named.id);
    assert!(mine.notice.is_none(), "no word of the person's: {mine:?}");

    // A shell session of the person's is not the agent's to type into.
    let in_session = SpawnRequest {
        session: Some("build".into()),
        ..spawn_req("echo in-session")
    };
    let first = spawn_with(&person, in_session.clone()).await;
    wait_exit(&person, first.id).await;
    let e = refused(&agent, Request::Spawn(in_session)).await;
    assert!(e.to_string().contains("another client's"), "{e}");

    // Pruning prunes its own only.
    let pruned = agent.call(Request::Prune).await.unwrap();
    assert!(matches!(pruned, Response::Pruned(1)), "{pruned:?}");
    assert!(listed(&person).await.contains(&done.id));

    // The person's shell never got the agent's line and still runs.
    let info = match person
        .call(Request::Info(cuba_protocol::IdRequest { id: shell.id }))
        .await
        .unwrap()
    {
        Response::Process(p) => p,
        other => panic!("{other:?}"),
    };
    assert!(!info.state.is_finished(), "{info:?}");

    // Across an upgrade in place, running records keep whose they are...
    let up = d.cubactl(&["daemon", "upgrade"]).output();
    let up = bounded("cubactl daemon upgrade", STEP, up).await.unwrap();
    assert!(up.status.success(), "{up:?}");
    let agent = confined(&d, "agent").await;
    assert_unreachable(&agent, shell.id).await;
    assert_unreachable(&agent, named.id).await;
    assert!(listed(&agent).await.contains(&mine.id));

    // ...and after a restart, finished ones too.
    let agent_named = mine.id;
    d.restart().await;
    let agent = confined(&d, "agent").await;
    let now = listed(&agent).await;
    assert!(
        !now.contains(&done.id) && !now.contains(&shell.id),
        "{now:?}"
    );
    assert!(now.contains(&agent_named), "{now:?}");
    assert_unreachable(&agent, done.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_of_a_confined_client_cannot_reach_past_it() {
    let d = TestDaemon::start().await;
    let person = d.client().await;
    let agent = confined(&d, "agent").await;
    let victim = spawn_with(&person, spawn_req("sleep 30")).await;
    let script = format!(
        "cubactl ps --all; echo ---; cubactl kill {id}; echo kill=$?; cubactl logs {id}; \
         echo logs=$?",
        id = victim.id
    );
    let req = SpawnRequest {
        env: vec![
            ("CUBA_EXEC_SOCKET".into(), d.socket().into()),
            ("NO_COLOR".into(), "1".into()),
            // Its own settings cleared: the tree's owner decides, not what it says of itself.
            ("CUBA_EXEC_ALLOWED_COMMANDS".into(), "".into()),
            (
                "PATH".into(),
                format!(
                    "{}:{}",
                    cuba_tests::bin("cubactl").parent().unwrap().display(),
                    std::env::var("PATH").unwrap_or_default()
                )
                .into(),
            ),
        ],
        ..spawn_req(&script)
    };
    let p = spawn_with(&agent, req).await;
    let r = wait_exit(&agent, p.id).await;
    let out = text(&cuba_tests::read_all(&agent, p.id).await);
    assert_eq!(r.process.exit_code, Some(0), "{out}");
    let (ps, rest) = out.split_once("---").unwrap();
    assert!(
        !ps.contains("sleep 30"),
        "the person's process is listed inside the agent's tree: {out}"
    );
    assert!(rest.contains("kill=1") || rest.contains("kill=2"), "{out}");
    assert!(rest.contains("no process with id"), "{out}");
    let alive = person
        .call(Request::Info(cuba_protocol::IdRequest { id: victim.id }))
        .await
        .unwrap();
    assert!(
        matches!(&alive, Response::Process(i) if !i.state.is_finished()),
        "{alive:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_and_signals_are_held_to_the_check_a_start_is() {
    let d = TestDaemon::start().await;
    let mut person = d.cubactl(&["start", "--", "sh", "-c", "read l; echo typed:$l; sleep 30"]);
    let started = bounded("cubactl start", STEP, person.output())
        .await
        .unwrap();
    assert!(started.status.success(), "{started:?}");
    let c = d.client().await;
    let all = listed(&c).await;
    let shell = *all.last().unwrap();
    // Not confined (it only blocks), so it sees the shared table; but it may not run `sh`,
    // so it may not type into one nor signal it.
    let narrow = client_with(&d, "narrow", &[("CUBA_EXEC_BLOCKED_COMMANDS", "sh")]).await;
    assert!(listed(&narrow).await.contains(&shell));
    let typed = refused(
        &narrow,
        Request::Stdin(StdinRequest {
            id: shell,
            data: b"id\n".to_vec(),
            eof: false,
            token: None,
        }),
    )
    .await;
    assert_eq!(typed.kind(), Some(ErrorKind::Blocked), "{typed}");
    assert!(typed.to_string().contains("could not start it"), "{typed}");
    let signalled = refused(
        &narrow,
        Request::Signal(SignalRequest {
            id: shell,
            signal: cuba_protocol::Signal::Kill,
            escalate: false,
            grace_ms: None,
            wait: false,
        }),
    )
    .await;
    assert_eq!(signalled.kind(), Some(ErrorKind::Blocked), "{signalled}");
    let audit = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap_or_default();
    assert!(audit.contains("act_as_started"), "{audit}");

    // The person types and stops it from a terminal.
    let sent = d.cubactl(&["send", &shell.to_string(), "hello"]).output();
    let sent = bounded("cubactl send", STEP, sent).await.unwrap();
    assert!(sent.status.success(), "{sent:?}");
    let kill = d.cubactl(&["kill", &shell.to_string()]).output();
    let kill = bounded("cubactl kill", STEP, kill).await.unwrap();
    assert!(kill.status.success(), "{kill:?}");
    let r = wait_exit(&c, shell).await;
    assert!(r.process.state.is_finished());
    let out = text(&cuba_tests::read_all(&c, shell).await);
    assert!(out.contains("typed:hello"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrowed_token_reaches_only_its_own_processes_over_http() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "", "").await;
    let person = d.client().await;
    let shell = spawn_with(&person, spawn_req("read l; echo typed:$l; sleep 30")).await;
    let root = d.dir().join("root");
    std::fs::create_dir(&root).unwrap();
    let narrow = s
        .token(&[
            "create",
            "phone",
            "--allow",
            "echo,cubactl,sh",
            "--roots",
            root.to_str().unwrap(),
        ])
        .await;
    let wide = s.token(&["create", "laptop"]).await;
    let (ns, ws) = (s.session(&narrow).await, s.session(&wide).await);
    let id = shell.id;

    let list = s.call(&narrow, &ns, "list_processes", json!({})).await;
    assert!(!list.text().contains(&format!("id:{id} ")), "{list:?}");
    for (tool, args) in [
        ("status", json!({"id": id})),
        ("wait", json!({"id": id, "timeout_ms": 100})),
        ("send_input", json!({"id": id, "text": "id\n"})),
        ("send_signal", json!({"id": id, "signal": "KILL"})),
    ] {
        let r = s.call(&narrow, &ns, tool, args).await;
        assert!(r.text().contains("NOT_FOUND"), "{tool}: {r:?}");
    }
    // From inside a command the token runs: the same.
    let inside = s
        .call(
            &narrow,
            &ns,
            "run",
            json!({"command": format!("cubactl kill {id}; echo kill=$?"),
                   "env": {"CUBA_EXEC_SOCKET": d.socket().to_str().unwrap(),
                           "PATH": format!("{}:/usr/bin:/bin",
                               cuba_tests::bin("cubactl").parent().unwrap().display())}}),
        )
        .await;
    assert!(inside.text().contains("no process with id"), "{inside:?}");
    // Its roots confine its writes: outside them (and temp), nothing is written.
    let outside = tempfile::Builder::new()
        .prefix("cx-tenant-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let target = outside.path().join("escaped");
    let write = s
        .call(
            &narrow,
            &ns,
            "run",
            json!({"command": format!("echo x > {}", target.display())}),
        )
        .await;
    assert!(write.text().contains("Permission denied"), "{write:?}");
    assert!(!target.exists(), "a rooted token wrote outside its roots");
    let inside_root = root.join("written");
    let ok = s
        .call(
            &narrow,
            &ns,
            "run",
            json!({"command": format!("echo x > {}", inside_root.display())}),
        )
        .await;
    assert!(inside_root.exists(), "{ok:?}");

    // Its own it reaches; the unnarrowed token keeps the shared table.
    let own = s
        .call(&narrow, &ns, "run", json!({"command": "echo mine"}))
        .await;
    assert!(own.text().contains("mine"), "{own:?}");
    let shared = s.call(&wide, &ws, "status", json!({"id": id})).await;
    // Alive and seen: `read` may have been noticed waiting for input by now (a loaded
    // machine takes long enough to get here), which is alive too.
    let seen = shared.text();
    assert!(
        seen.contains("state:running") || seen.contains("state:waiting_input"),
        "{shared:?}"
    );
    let alive = person
        .call(Request::Info(cuba_protocol::IdRequest { id }))
        .await
        .unwrap();
    assert!(
        matches!(&alive, Response::Process(i) if !i.state.is_finished()),
        "{alive:?}"
    );
}
