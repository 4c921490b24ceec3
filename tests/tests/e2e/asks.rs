//! `ask` decisions end to end, through the protocol and `cubactl`: a command asked about waits
//! in `awaiting_approval` (nothing runs: its marker stays unmade) until a person approves it
//! once or always, denies it with a reason, or nobody does in time; an `ask` program reached
//! through a runtime name or a wrapper no list names is held at its exec; only a person answers
//! (an approval from inside a command's tree is refused); a held command can be stopped.
//! Passwords asked through the askpass helper: `password` (the genuine git, the agent's own
//! askpass program) and `sudo` (the real `sudo -A`, and programs that only call themselves
//! sudo).

#![allow(clippy::unwrap_used)]

mod password;
mod setuid;
mod sudo;

use std::path::Path;
use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::{
    AskKind, ListRequest, ProcState, ProcessInfo, Request, Response, SpawnRequest, WaitReason,
    WaitRequest, WaitSpec,
};
use cuba_tests::{machine, spawn_req, wait_exit, Step, TestDaemon};

/// A daemon that asks before `touch` (and `mkdir -p`) runs.
async fn asking(extra: &[(&str, &str)]) -> TestDaemon {
    let mut b = TestDaemon::builder().env("CUBA_EXEC_ASK_COMMANDS", "touch *, mkdir -p*");
    for (k, v) in extra {
        b = b.env(k, v);
    }
    b.start().await
}

fn in_dir(command: &str, cwd: &Path) -> SpawnRequest {
    SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..spawn_req(command)
    }
}

/// Waits until process `id` puts a question to the person (a wait ends at once when it is held
/// for an approval or waits for a password), and returns it.
async fn held(c: &Client, id: u64) -> ProcessInfo {
    let w = c
        .wait(WaitRequest {
            id,
            since: None,
            spec: WaitSpec::exit(20_000, 0),
        })
        .step()
        .await
        .unwrap();
    let p = w.process;
    assert!(
        matches!(
            w.reason,
            WaitReason::AwaitingApproval | WaitReason::WaitingInput
        ) && !p.asks.is_empty(),
        "process {id} put no question to the person: {:?} {p:?}",
        w.reason
    );
    p
}

/// Waits until process `id`'s row satisfies `cond` (`what` names it), however often it is held
/// or waits for a password on the way (a wait would end at each question): woken by the
/// table's changes.
async fn watch_until(
    c: &Client,
    id: u64,
    what: &str,
    cond: impl Fn(&ProcessInfo) -> bool,
) -> ProcessInfo {
    let mut rows = c
        .subscribe(Request::WatchTable(ListRequest::default()))
        .await
        .unwrap();
    let seen = async {
        while let Some(Ok(Response::List(l))) = rows.next().await {
            match l.processes.into_iter().find(|p| p.id == id) {
                Some(p) if cond(&p) => return p,
                _ => {}
            }
        }
        panic!("the table watch ended before process {id} came to {what}");
    };
    cuba_tests::bounded(&format!("{what} of {id}"), Duration::from_secs(30), seen).await
}

/// Waits until process `id` has ended (see [`watch_until`]).
async fn ended(c: &Client, id: u64) -> ProcessInfo {
    let p = watch_until(c, id, "the end", |p| p.state.is_finished()).await;
    // Its output is all in once it has ended and its pipes are drained.
    wait_exit(c, id).await;
    p
}

/// Spawns `touch <dir>/marker` (asked about under [`asking`]): the marker's path and the row.
async fn touch_marker(d: &TestDaemon, c: &Client) -> (std::path::PathBuf, ProcessInfo) {
    let marker = d.dir().join("marker");
    let text = format!("touch {}", marker.display());
    (marker, c.spawn(spawn_req(&text)).step().await.unwrap())
}

/// Runs `cubactl ARGS` against `d` and returns (success, stdout, stderr).
async fn cubactl(d: &TestDaemon, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    use tokio::io::AsyncWriteExt;
    let mut cmd = d.cubactl(args);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    let out = child.wait_with_output().step().await.unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn audit(d: &TestDaemon) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn ask_lines(d: &TestDaemon, id: u64) -> Vec<String> {
    audit(d)
        .into_iter()
        .filter(|l| l["event"] == "ask" && l["id"] == id)
        .map(|l| l["decision"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_asked_about_waits_until_a_person_approves_it_once() {
    let d = asking(&[]).await;
    let c = d.client().await;
    let marker = d.dir().join("marker");
    let text = format!("touch {} && echo made", marker.display());
    let p = c.spawn(in_dir(&text, d.dir())).step().await.unwrap();
    assert_eq!(p.state, ProcState::AwaitingApproval, "{p:?}");
    let ask = &p.asks[0];
    assert_eq!(
        (ask.kind, ask.rule.as_str(), ask.what.as_str()),
        (AskKind::Command, "ask_commands: touch *", text.as_str())
    );
    // Nothing ran: held, not started.
    assert_eq!(p.pid, 0);
    assert!(!marker.exists());
    let (ok, listed, _) = cubactl(&d, &["approvals"], None).await;
    assert!(
        ok && listed.contains(&format!("process {} (ask {})", p.id, ask.id)),
        "{listed}"
    );
    let (ps_ok, ps, _) = cubactl(&d, &["ps"], None).await;
    assert!(ps_ok && ps.contains("awaiting_approval"), "{ps}");
    // As docs/json.md gives it.
    let (ok, json, _) = cubactl(&d, &["info", &p.id.to_string(), "--json"], None).await;
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(ok && json["state"] == "awaiting_approval", "{json}");
    assert_eq!(json["asks"][0]["kind"], "command", "{json}");
    cuba_tests::json_doc::assert_documented(&json, &cuba_tests::json_doc::names(true), "info");
    let (ok, _, said) = cubactl(&d, &["approve", &p.id.to_string()], None).await;
    assert!(ok, "{said}");
    let done = wait_exit(&c, p.id).await;
    assert_eq!(done.process.exit_code, Some(0), "{:?}", done.process);
    assert!(marker.exists());
    assert!(done.process.asks.is_empty());
    assert_eq!(ask_lines(&d, p.id), ["asked", "approved"]);
    // Approved as a whole: its own exec of touch is not asked about again (exec checks).
    assert!(
        done.process.blocked.is_empty(),
        "{:?}",
        done.process.blocked
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_always_is_remembered_for_its_rule_in_its_directory() {
    let d = asking(&[]).await;
    let c = d.client().await;
    let project = d.dir().join("project");
    std::fs::create_dir_all(project.join("sub")).unwrap();
    let p = c.spawn(in_dir("touch a", &project)).step().await.unwrap();
    let id = p.id.to_string();
    let (ok, _, said) = cubactl(&d, &["approve", &id, "--always"], None).await;
    assert!(ok, "{said}");
    assert_eq!(wait_exit(&c, p.id).await.process.exit_code, Some(0));
    let file = std::fs::read_to_string(d.dir().join("approvals.toml")).unwrap();
    assert!(
        file.contains("rule = \"ask_commands: touch *\"")
            && file.contains(&format!("dir = \"{}\"", project.display()))
            && file.contains("channel = \"cubactl\""),
        "{file}"
    );
    // The same rule in the same directory (and below): runs without asking.
    let again = c
        .spawn(in_dir("touch b", &project.join("sub")))
        .step()
        .await
        .unwrap();
    assert_ne!(again.state, ProcState::AwaitingApproval, "{again:?}");
    assert_eq!(wait_exit(&c, again.id).await.process.exit_code, Some(0));
    assert_eq!(ask_lines(&d, again.id), Vec::<String>::new());
    assert!(audit(&d)
        .iter()
        .any(|l| l["decision"] == "remembered" && l["command"] == "touch b"));
    // Another rule still asks, and so does the same rule elsewhere.
    let other = c
        .spawn(in_dir("mkdir -p x", &project))
        .step()
        .await
        .unwrap();
    held(&c, other.id).await;
    let elsewhere = c.spawn(in_dir("touch c", d.dir())).step().await.unwrap();
    held(&c, elsewhere.id).await;
    // Forgotten: asked again.
    let (ok, listed, _) = cubactl(&d, &["approvals"], None).await;
    assert!(
        ok && listed.contains("1. ask_commands: touch *"),
        "{listed}"
    );
    let (ok, _, said) = cubactl(&d, &["approvals", "forget", "1"], None).await;
    assert!(ok, "{said}");
    let after = c.spawn(in_dir("touch d", &project)).step().await.unwrap();
    held(&c, after.id).await;
    for id in [other.id, elsewhere.id, after.id] {
        let (ok, _, said) = cubactl(&d, &["deny", &id.to_string()], None).await;
        assert!(ok, "{said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_ends_the_command_with_its_reason_and_nothing_ran() {
    let d = asking(&[]).await;
    let c = d.client().await;
    let marker = d.dir().join("marker");
    let text = format!("touch {}", marker.display());
    let p = c.spawn(spawn_req(&text)).step().await.unwrap();
    let id = p.id.to_string();
    let (ok, _, said) = cubactl(&d, &["deny", &id, "--reason", "not on Fridays"], None).await;
    assert!(ok, "{said}");
    let done = wait_exit(&c, p.id).await.process;
    assert_eq!(done.state, ProcState::Denied, "{done:?}");
    let why = done.error.unwrap_or_default();
    assert!(
        why.contains("not on Fridays") && why.contains("cubactl"),
        "{why}"
    );
    assert!(!marker.exists());
    assert_eq!(ask_lines(&d, p.id), ["asked", "denied"]);
    let end = audit(&d)
        .into_iter()
        .find(|l| l["event"] == "end" && l["id"] == p.id)
        .unwrap();
    assert_eq!(end["decision"], "denied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_answering_within_the_timeout_is_a_denial() {
    let d = asking(&[("CUBA_EXEC_APPROVAL_TIMEOUT", "300ms")]).await;
    let c = d.client().await;
    let (marker, p) = touch_marker(&d, &c).await;
    assert_eq!(p.state, ProcState::AwaitingApproval);
    let done = ended(&c, p.id).await;
    assert_eq!(done.state, ProcState::Denied);
    let why = done.error.unwrap_or_default();
    assert!(why.contains("nobody answered within"), "{why}");
    assert!(!marker.exists());
    assert_eq!(ask_lines(&d, p.id), ["asked", "timed_out"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_from_inside_a_command_tree_is_refused() {
    let d = asking(&[]).await;
    let c = d.client().await;
    let (marker, p) = touch_marker(&d, &c).await;
    // An agent trying to approve its own command through the daemon it runs under.
    let bin = cuba_tests::bin("cubactl");
    let socket = d.socket().display().to_string();
    let text = format!(
        "'{}' --socket '{socket}' approve {} 2>&1; '{0}' --socket '{socket}' approvals forget \
         --all 2>&1",
        bin.display(),
        p.id
    );
    let agent = c.spawn(spawn_req(&text)).step().await.unwrap();
    let out = wait_exit(&c, agent.id).await;
    let said = String::from_utf8_lossy(&cuba_tests::read_all(&c, agent.id).await).into_owned();
    assert!(
        said.contains("only a person can approve a command")
            && said.contains("only a person can forget an approval"),
        "{said} {:?}",
        out.process
    );
    let still = c.info(p.id).await.unwrap();
    assert_eq!(still.state, ProcState::AwaitingApproval);
    assert!(!marker.exists());
    let (ok, _, said) = cubactl(&d, &["deny", &p.id.to_string()], None).await;
    assert!(ok, "{said}");
}

/// Whether the daemon checks execs; a skip (a failure in CI) when it cannot here.
async fn checking(c: &Client, what: &str) -> bool {
    let s = c.status().step().await.unwrap();
    if s.exec_checks.starts_with("on") {
        return true;
    }
    machine::skip(what, &format!("exec checks are {}", s.exec_checks));
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_asked_about_is_held_at_its_exec_when_no_parser_could_see_it() {
    let d = asking(&[]).await;
    let c = d.client().await;
    if !checking(&c, "asks at exec time").await {
        return;
    }
    // A name only the shell knows, at run time; a wrapper no list names (python's execvp):
    // both allowed at parse time, held at the exec.
    fn shell(m: &Path) -> String {
        format!(
            "x=$(printf to; printf uch); $x {}; echo \"exit $?\"",
            m.display()
        )
    }
    fn wrapper(m: &Path) -> String {
        format!(
            "python3 -c 'import os, sys; os.execvp(sys.argv[1], sys.argv[1:])' touch {} \
             2>/dev/null; echo \"exit $?\"",
            m.display()
        )
    }
    type Way = (&'static str, fn(&Path) -> String);
    let ways: [Way; 2] = [("shell", shell), ("wrapper", wrapper)];
    for ((how, text), approve) in ways.iter().flat_map(|w| [(w, true), (w, false)]) {
        let marker = d.dir().join(format!("marker-{how}-{approve}"));
        let text = text(&marker);
        let p = c.spawn(spawn_req(&text)).step().await.unwrap();
        let held = held(&c, p.id).await;
        let ask = &held.asks[0];
        assert_eq!(ask.kind, AskKind::Exec, "{ask:?}");
        assert!(ask.what.starts_with("touch "), "{ask:?}");
        assert!(ask.pid > 0 && held.pid > 0);
        assert!(!marker.exists(), "ran before an answer");
        let id = p.id.to_string();
        let answer = match approve {
            true => cubactl(&d, &["approve", &id], None).await,
            false => cubactl(&d, &["deny", &id, "--reason", "no touching"], None).await,
        };
        assert!(answer.0, "{}", answer.2);
        let done = wait_exit(&c, p.id).await.process;
        let out = String::from_utf8_lossy(&cuba_tests::read_all(&c, p.id).await).into_owned();
        assert_eq!(marker.exists(), approve, "{out}");
        match approve {
            true => assert!(out.contains("exit 0"), "{out}"),
            false => {
                // Refused once, however many PATH entries the shell (or execvp) tries; the
                // shell says 126, python's uncaught PermissionError 1.
                let code = if *how == "shell" {
                    "exit 126"
                } else {
                    "exit 1"
                };
                assert!(out.contains(code), "{out}");
                let refused: Vec<_> = done.blocked.iter().filter(|b| b.rule == "ask").collect();
                assert_eq!(refused.len(), 1, "{:?}", done.blocked);
                assert!(refused[0].message.contains("no touching"), "{refused:?}");
            }
        }
        assert_eq!(ask_lines(&d, p.id).len(), 2, "{:?}", ask_lines(&d, p.id));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_command_can_be_stopped_while_it_awaits_approval() {
    let d = asking(&[]).await;
    let c = d.client().await;
    // Held before it started.
    let p = c.spawn(spawn_req("touch x")).step().await.unwrap();
    let (ok, _, said) = cubactl(&d, &["kill", &p.id.to_string()], None).await;
    assert!(ok, "{said}");
    let done = wait_exit(&c, p.id).await.process;
    assert_eq!(done.state, ProcState::Killed, "{done:?}");
    let why = done.error.as_deref().unwrap_or_default();
    assert!(
        why.contains("stopped on request while it awaited approval"),
        "{done:?}"
    );
    assert!(done.asks.is_empty());
    assert!(c.approvals().await.unwrap().pending.is_empty());
    // Its question was withdrawn by the person who stopped it, and says so.
    assert_eq!(ask_lines(&d, p.id), ["asked", "stopped"]);
    let line = audit(&d)
        .into_iter()
        .find(|l| l["event"] == "ask" && l["id"] == p.id && l["decision"] == "stopped");
    assert_eq!(line.unwrap()["channel"], "cubactl");
    // Held at an exec, its shell running.
    if !checking(&c, "a held exec stopped").await {
        return;
    }
    let q = c
        .spawn(spawn_req("x=$(printf touch); $x y"))
        .step()
        .await
        .unwrap();
    held(&c, q.id).await;
    let (ok, _, said) = cubactl(&d, &["kill", &q.id.to_string()], None).await;
    assert!(ok, "{said}");
    let done = wait_exit(&c, q.id).await.process;
    assert_eq!(done.state, ProcState::Killed, "{done:?}");
    assert!(d.marked(q.id).is_empty());
    // An ended process has no question waiting.
    let pending = c.approvals().await.unwrap().pending;
    assert!(pending.is_empty(), "{pending:?}");
}

/// An upgrade replaces the program that holds an exec for a person: the exec would wait for
/// an answer nobody can give. So the upgrade is refused, saying why, until it is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_awaiting_a_person_holds_off_an_upgrade_until_answered() {
    let d = asking(&[]).await;
    let c = d.client().await;
    if !checking(&c, "an upgrade with a held exec").await {
        return;
    }
    let marker = d.dir().join("marker");
    let q = c
        .spawn(spawn_req(&format!(
            "x=$(printf touch); $x {}; echo after",
            marker.display()
        )))
        .step()
        .await
        .unwrap();
    held(&c, q.id).await;
    let (ok, _, said) = cubactl(&d, &["daemon", "upgrade"], None).await;
    assert!(!ok, "upgraded with an exec held: {said}");
    assert!(said.contains("wait for the user"), "{said}");
    // Still the same daemon, the question still there and answerable.
    assert_eq!(c.status().step().await.unwrap().upgrades, 0);
    let (ok, _, said) = cubactl(&d, &["approve", &q.id.to_string()], None).await;
    assert!(ok, "{said}");
    let done = ended(&c, q.id).await;
    assert_eq!((done.state, done.exit_code), (ProcState::Exited, Some(0)));
    assert!(marker.exists());
    let (ok, _, said) = cubactl(&d, &["daemon", "upgrade"], None).await;
    assert!(ok, "{said}");
    assert_eq!(d.client().await.status().step().await.unwrap().upgrades, 1);
}
