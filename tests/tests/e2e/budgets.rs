//! Budgets per agent (Linux cgroups): an agent's trees share one cgroup above their own, with
//! its CPU, memory and pids limits; a hit is an event and a sentence in its processes' rows; a
//! command cannot leave its agent's budget by starting another through `cubactl` from inside
//! (nor by `setsid`); another agent is not held by it; the listing shows use against budget,
//! a confined caller only its own; tokens carry a budget; and everything goes at shutdown.

#![allow(clippy::unwrap_used)]

use cuba_protocol::client::Client;
use cuba_protocol::{ClientKind, EventKind, EventsRequest, ListRequest, TokenCreate};
use cuba_tests::{client_with, read_all, spawn, text, wait_exit, Step, TestDaemon};

/// A daemon with cgroups and `agents` as its `CUBA_EXEC_AGENTS`; `None` (and a skip said)
/// where the machine has no writable cgroup tree.
async fn daemon(agents: &str) -> Option<TestDaemon> {
    daemon_with(&[("CUBA_EXEC_AGENTS", agents)]).await
}

/// A daemon with cgroups and `env`, as [`daemon`].
async fn daemon_with(env: &[(&str, &str)]) -> Option<TestDaemon> {
    if cuba_tests::machine::writable_cgroup_v2().is_none() {
        cuba_tests::machine::skip("budgets", "no writable cgroup v2 tree here");
        return None;
    }
    let b = TestDaemon::builder().env("CUBA_EXEC_CGROUPS", "on");
    Some(b.envs(env).start().await)
}

async fn agent(d: &TestDaemon, name: &str) -> Client {
    client_with(d, ClientKind::Mcp, name, &[]).await
}

/// What `command` prints, run to its end by `c`.
async fn output(c: &Client, command: &str) -> String {
    let p = spawn(c, command).await;
    wait_exit(c, p.id).await;
    text(&read_all(c, p.id).await)
}

/// The cgroup lines of `/proc/self/cgroup` that name an agent's cgroup.
fn agent_lines(cgroups: &str) -> Vec<&str> {
    cgroups.lines().filter(|l| l.contains("/agent.")).collect()
}

/// Follows the event log until a `budget` limit event whose detail holds `words`.
async fn budget_event(c: &Client, words: &str) -> String {
    let mut feed = c
        .follow_events(EventsRequest::default())
        .step()
        .await
        .unwrap();
    loop {
        let batch = feed.next().step().await.unwrap().unwrap();
        for e in batch.events {
            if let EventKind::LimitHit { limit, detail } = e.kind {
                if limit == "budget" && detail.contains(words) {
                    return detail;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_trees_share_its_cpu_budget_and_reaching_it_is_an_event() {
    let Some(d) = daemon("hog:cpu=0.2").await else {
        return;
    };
    let hog = agent(&d, "hog").await;
    let other = agent(&d, "other").await;
    // Two busy trees of one agent: 0.2 of a core between them.
    let a = spawn(&hog, "while :; do :; done").await;
    let b = spawn(&hog, "while :; do :; done").await;
    let detail = budget_event(&other, "cpu budget of agent hog (0.2 cores)").await;
    assert!(detail.contains("held back"), "{detail}");
    // Each tree is in the agent's cgroup, in every hierarchy that holds a limit or its figures.
    for p in [&a, &b] {
        let own = std::fs::read_to_string(format!("/proc/{}/cgroup", p.pid)).unwrap();
        let lines = agent_lines(&own);
        assert!(lines.iter().any(|l| l.starts_with("0::")), "{own}");
        assert!(lines.iter().all(|l| l.contains("/agent.hog")), "{own}");
    }
    // Another agent is not held by it.
    let free = output(&other, "cat /proc/self/cgroup").await;
    assert!(agent_lines(&free).is_empty(), "{free}");
    // The listing shows the use against the budget; the row says the budget was reached.
    let list = other.listing(ListRequest::default()).step().await.unwrap();
    let use_ = list
        .budgets
        .iter()
        .find(|u| u.agent == "hog")
        .expect("hog's budget");
    assert_eq!(use_.budget.cpu_millis, Some(200), "{use_:?}");
    assert!(use_.throttled_ms.is_some_and(|t| t > 0), "{use_:?}");
    // The kernel's quota, over one second: two busy loops get 0.2 of a core, not 2.
    assert!(use_.cpu_millis.is_some_and(|m| m <= 300), "{use_:?}");
    assert!(use_.line().starts_with("hog: cpu "), "{}", use_.line());
    let row = hog.info(a.id).step().await.unwrap();
    assert_eq!(row.budget.as_deref(), Some("hog"));
    assert!(row.budget_hit.unwrap_or_default().contains("cpu budget"));
    // A person's `cubactl ps` says it too.
    let ps = d.cubactl(&["ps"]).output().step().await.unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(
        ps.contains("budgets (use now/budget):") && ps.contains("hog: cpu"),
        "{ps}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_leave_its_agents_budget() {
    let Some(d) = daemon("jailed:cpu=0.5,pids=64").await else {
        return;
    };
    let c = agent(&d, "jailed").await;
    let ctl = format!(
        "'{}' --socket '{}'",
        cuba_tests::bin("cubactl").display(),
        d.socket().display()
    );
    // From inside its tree: through cubactl (a person's client, no budget of its own), with
    // its environment cleared, and from a new session.
    let said = output(
        &c,
        &format!(
            "{ctl} run -- cat /proc/self/cgroup; echo ---; \
             env -i {ctl} run -- cat /proc/self/cgroup; echo ---; \
             setsid sh -c 'cat /proc/self/cgroup'"
        ),
    )
    .await;
    let parts: Vec<&str> = said.split("---").collect();
    assert_eq!(parts.len(), 3, "{said}");
    for part in parts {
        let lines = agent_lines(part);
        assert!(!lines.is_empty(), "left its agent's cgroup: {said}");
        assert!(lines.iter().all(|l| l.contains("/agent.jailed")), "{said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_and_a_memory_hog_meet_their_agents_budget() {
    let Some(d) = daemon("bomb:pids=16,memory=48M").await else {
        return;
    };
    let c = agent(&d, "bomb").await;
    // Forks refused at the budget: said when the tree ends, as an event and in its row.
    let p = spawn(&c, "for i in $(seq 40); do sleep 20 & done; wait").await;
    let done = wait_exit(&c, p.id).await;
    let hit = done.process.budget_hit.clone().unwrap_or_default();
    assert!(
        hit.contains("pids budget of agent bomb (16 processes)"),
        "{:?}",
        done.process
    );
    let detail = budget_event(&c, "pids budget of agent bomb").await;
    assert!(detail.contains("refused"), "{detail}");
    // Memory over the agent's budget: the kernel's OOM kill, and the budget named as its cause.
    let p = spawn(&c, "head -c 200M /dev/zero | tail").await;
    let w = wait_exit(&c, p.id).await;
    let error = w.process.error.unwrap_or_default();
    assert!(error.contains("out of memory"), "{error}");
    assert!(
        error.contains("memory budget of agent bomb (48 MiB)"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_shows_its_own_agent_first_and_others_only_while_they_run() {
    let Some(d) = daemon("a:pids=100;b:pids=200;c:pids=300;z:pids=400").await else {
        return;
    };
    let a = agent(&d, "a").await;
    let b = client_with(
        &d,
        ClientKind::Mcp,
        "b",
        &[("CUBA_EXEC_ALLOWED_COMMANDS", "sleep,true")],
    )
    .await;
    let c = agent(&d, "c").await;
    let z = agent(&d, "z").await;
    output(&a, "true").await;
    output(&c, "true").await;
    spawn(&b, "sleep 60").await;
    spawn(&z, "sleep 60").await;
    let names = |l: &cuba_protocol::Listing| -> Vec<String> {
        l.budgets.iter().map(|u| u.agent.clone()).collect()
    };
    // Unconfined: its own (running nothing) first, then those running something; `c`, done,
    // is not there.
    let seen = z.listing(ListRequest::default()).step().await.unwrap();
    assert_eq!(names(&seen), ["z", "b"]);
    let seen = a.listing(ListRequest::default()).step().await.unwrap();
    assert_eq!(names(&seen), ["a", "b", "z"]);
    // Confined: its own only.
    let own = b.listing(ListRequest::default()).step().await.unwrap();
    assert_eq!(names(&own), ["b"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_carries_a_budget() {
    let Some(d) = daemon("").await else {
        return;
    };
    let c = d.client().await;
    let made = c
        .token_create(TokenCreate {
            name: "ci".into(),
            hosts: None,
            allow: None,
            roots: None,
            expires_in: None,
            replace: false,
            budget: Some(cuba_protocol::Budget {
                cpu_millis: Some(300),
                memory: None,
                pids: Some(32),
            }),
        })
        .step()
        .await
        .unwrap();
    assert_eq!(made.info.budget.and_then(|b| b.pids), Some(32));
    let listed = d.cubactl(&["token", "list"]).output().step().await.unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("budget=(cpu 0.3, pids 32)"), "{listed}");
    // What the token's caller starts (its name is the token's) is held by it.
    let ci = agent(&d, "ci").await;
    let own = output(&ci, "cat /proc/self/cgroup").await;
    assert!(
        agent_lines(&own).iter().any(|l| l.contains("/agent.ci")),
        "{own}"
    );
    // Its own agent's line, though it runs nothing now.
    let list = ci.listing(ListRequest::default()).step().await.unwrap();
    let u = list
        .budgets
        .iter()
        .find(|u| u.agent == "ci")
        .expect("ci's budget");
    assert_eq!((u.budget.cpu_millis, u.budget.pids), (Some(300), Some(32)));
    // Made again with a limit of a kind it had not: it holds what starts after.
    let out = d
        .cubactl(&[
            "token",
            "create",
            "ci",
            "--replace",
            "--cpu",
            "0.3",
            "--memory",
            "40M",
        ])
        .output()
        .step()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = spawn(&ci, "head -c 200M /dev/zero | tail").await;
    let error = wait_exit(&ci, p.id).await.process.error.unwrap_or_default();
    assert!(
        error.contains("memory budget of agent ci (40 MiB)"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_without_cgroups_stop_the_daemon_with_the_reason() {
    let dir = tempfile::Builder::new()
        .prefix("cx")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in("/tmp")
        .unwrap();
    let out = tokio::process::Command::new(cuba_tests::bin("cubad"))
        .env("CUBA_EXEC_SOCKET", dir.path().join("s"))
        .env("CUBA_EXEC_STATE_DIR", dir.path().join("state"))
        .env("CUBA_EXEC_CGROUPS", "off")
        .env("CUBA_EXEC_AGENT_CPU", "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .step()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {said}");
    assert!(said.contains("budgets per agent need cgroups"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_cgroups_go_at_shutdown() {
    let Some(d) = daemon("gone:cpu=1").await else {
        return;
    };
    let c = agent(&d, "gone").await;
    let own = output(&c, "cat /proc/self/cgroup").await;
    assert!(!agent_lines(&own).is_empty(), "{own}");
    let v2 = cuba_tests::machine::writable_cgroup_v2().unwrap();
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap()
        .trim();
    let agent_dir = v2.join(rel.trim_start_matches('/'));
    let agent_dir = agent_dir.parent().unwrap().to_path_buf();
    assert!(agent_dir.ends_with("agent.gone"), "{}", agent_dir.display());
    let out = d
        .cubactl(&["daemon", "stop"])
        .output()
        .step()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!agent_dir.exists(), "{} is left", agent_dir.display());
}

/// Over HTTP with a narrowed token (its roots put its commands in the sandbox): its commands are
/// held by the token's budget and cannot write themselves out of it into another cgroup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrowed_tokens_commands_cannot_write_themselves_out_of_its_budget() {
    let Some(d) = daemon("").await else {
        return;
    };
    let s = cuba_tests::http::HttpServer::start(&d, "", "").await;
    let root = d.dir().join("work");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let token = s
        .token(&[
            "create",
            "narrow",
            "--roots",
            root.to_str().unwrap(),
            "--cpu",
            "0.2",
        ])
        .await;
    let session = s.session(&token).await;
    // The cgroups it could move itself to: the test's own (the daemon's parent) in v2, and the
    // v1 cpu hierarchy's root.
    let v2 = cuba_tests::machine::writable_cgroup_v2().unwrap();
    let targets = [
        v2.join("cgroup.procs"),
        "/sys/fs/cgroup/cpu/cgroup.procs".into(),
    ];
    let mut script = String::from("cat /proc/self/cgroup; echo ---; ");
    for t in &targets {
        script.push_str(&format!(
            "(echo $$ > '{}') 2>/dev/null && echo moved || echo refused; ",
            t.display()
        ));
    }
    script.push_str("echo ---; cat /proc/self/cgroup");
    let r = s
        .call(
            &token,
            &session,
            "run",
            serde_json::json!({"command": script}),
        )
        .await;
    let said = r.text();
    let parts: Vec<&str> = said.split("---").collect();
    assert_eq!(parts.len(), 3, "{said}");
    assert!(!parts[1].contains("moved"), "a move was allowed: {said}");
    for part in [parts[0], parts[2]] {
        let lines = agent_lines(part);
        assert!(!lines.is_empty(), "{said}");
        assert!(lines.iter().all(|l| l.contains("/agent.narrow")), "{said}");
    }
}

/// The v1 cgroup a budget enters directly (cpu), in a hierarchy the daemon uses only for
/// budgets, is removed at the next start after a crash, with the crashed daemon's processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_daemons_agent_cgroups_go_at_the_next_start() {
    let Some(mut d) = daemon("left:cpu=0.5").await else {
        return;
    };
    let c = agent(&d, "left").await;
    let p = spawn(&c, "sleep 300").await;
    let own = std::fs::read_to_string(format!("/proc/{}/cgroup", p.pid)).unwrap();
    // `N:cpu:PATH` or `N:cpu,cpuacct:PATH`: where the cpu controller's hierarchy is mounted.
    let (ctrls, rel) = own
        .lines()
        .filter_map(|l| l.split_once(':').map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once(':'))
        .find(|(ctrls, _)| ctrls.split(',').any(|c| c == "cpu"))
        .expect("a v1 cpu line");
    assert!(rel.ends_with("/agent.left"), "{own}");
    let v1 = std::path::Path::new("/sys/fs/cgroup")
        .join(ctrls)
        .join(rel.trim_start_matches('/'));
    assert!(v1.is_dir(), "{}", v1.display());
    drop(c);
    d.restart().await;
    assert!(
        cuba_tests::wait_for(|| !cuba_tests::pid_alive(p.pid as i32), cuba_tests::STEP).await,
        "the crashed daemon's process survived"
    );
    assert!(!v1.exists(), "{} is left", v1.display());
}

/// Agents' cgroups are bounded (names come from clients): past the bound, those running
/// nothing make room, and every agent's command still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_agent_names_do_not_exhaust_the_agents_cgroups() {
    let Some(d) = daemon_with(&[("CUBA_EXEC_AGENT_PIDS", "64")]).await else {
        return;
    };
    // One more than the daemon keeps (256).
    for i in 0..257 {
        let c = agent(&d, &format!("agent-{i}")).await;
        let p = spawn(&c, "true").await;
        let done = wait_exit(&c, p.id).await;
        assert_eq!(
            done.process.exit_code,
            Some(0),
            "agent-{i}: {:?}",
            done.process
        );
        assert_eq!(
            done.process.budget.as_deref(),
            Some(format!("agent-{i}").as_str())
        );
    }
}
