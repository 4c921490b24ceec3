//! `ask` decisions through MCP (the real `cuba-exec` binary, rmcp's client, a 2025 connection):
//! a client that can ask its user puts the daemon's question to them as a form and the command
//! runs (or not) by their answer; one that cannot, or whose user dismisses the form, is told
//! the command awaits the person's answer in their terminal, and `wait` returns once they have
//! given it; a question about a process another client started is not put to this one's user;
//! and a password is never asked through a client.

use crate::common;

use common::mcp::{binary, binary_eliciting, Elicit, Mcp};
use common::TestDir;
use cuba_protocol::client::{this_client, Client};
use cuba_protocol::{ApproveRequest, ClientKind, DenyRequest, ProcState};
use serde_json::{json, Value};
use tokio::sync::mpsc;

const ASK: (&str, &str) = ("CUBA_EXEC_ASK_COMMANDS", "touch *");

async fn asking() -> TestDir {
    TestDir::with_daemon_env(&[ASK, ("CUBA_EXEC_NOTIFY", "off")]).await
}

/// A connection as a person at a terminal would have (`cubactl`).
async fn person(t: &TestDir) -> Client {
    Client::connect(&t.socket(), this_client(ClientKind::Cli, "person"))
        .await
        .expect("a direct connection")
}

/// A client whose user answers every form with `answer` (`None`: declines).
async fn eliciting(
    t: &mut TestDir,
    answer: Option<Value>,
) -> (Mcp, mpsc::UnboundedReceiver<String>) {
    let (asked, forms) = mpsc::unbounded_channel();
    let c = binary_eliciting(t, "eliciting", Elicit { answer, asked }).await;
    (c, forms)
}

fn touch(t: &TestDir, name: &str) -> (std::path::PathBuf, Value) {
    let marker = t.path().join(name);
    let args = json!({ "command": format!("touch {} && echo made", marker.display()) });
    (marker, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_cannot_ask_is_told_the_command_awaits_the_person() {
    let mut t = asking().await;
    let c = binary(&mut t, "plain", &[]).await;
    let (marker, args) = touch(&t, "marker");
    let r = c.call("run", args).await;
    assert_eq!(r.state(), "awaiting_approval", "{}", r.text());
    let id = r.id();
    assert!(
        r.text().contains(&format!("cubactl approve {id}")) && r.text().contains("touch *"),
        "{}",
        r.text()
    );
    assert!(!marker.exists());
    // A wait says the same while nobody has answered.
    let w = c
        .call("wait", json!({ "id": id, "timeout_ms": 5_000 }))
        .await;
    assert_eq!(w.state(), "awaiting_approval", "{}", w.text());
    // The person approves in their terminal; the wait then sees it run.
    let p = person(&t).await;
    let approved = p
        .approve(ApproveRequest {
            id,
            ask: None,
            always: false,
            dir: None,
        })
        .await
        .expect("the approval");
    assert_ne!(approved.state, ProcState::AwaitingApproval);
    let done = c.wait_exit(id, 0).await;
    assert!(done.output().contains("made"), "{}", done.text());
    assert!(marker.exists());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_can_ask_puts_the_question_to_its_user_and_runs_by_the_answer() {
    let mut t = asking().await;
    let (c, mut forms) = eliciting(&mut t, Some(json!({ "decision": "approve_once" }))).await;
    let (marker, args) = touch(&t, "yes");
    let r = c.call("run", args).await;
    assert!(!r.is_error() && r.output().contains("made"), "{}", r.text());
    assert!(marker.exists());
    let form = forms.try_recv().expect("the user was asked");
    assert!(
        form.contains("needs your approval") && form.contains("ask_commands: touch *"),
        "{form}"
    );
    assert!(forms.try_recv().is_err(), "asked twice");
    c.close().await;

    let (c, mut forms) = eliciting(
        &mut t,
        Some(json!({ "decision": "deny", "reason": "not today" })),
    )
    .await;
    let (marker, args) = touch(&t, "no");
    let r = c.call("run", args).await;
    assert_eq!(r.code(), Some("DENIED"), "{}", r.text());
    assert!(r.text().contains("not today"), "{}", r.text());
    assert!(!marker.exists());
    assert!(forms.try_recv().is_ok());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dismissed_form_leaves_the_command_to_the_person() {
    let mut t = asking().await;
    let (c, mut forms) = eliciting(&mut t, None).await;
    let (marker, args) = touch(&t, "later");
    let r = c.call("run", args).await;
    assert_eq!(r.state(), "awaiting_approval", "{}", r.text());
    assert!(forms.try_recv().is_ok());
    let id = r.id();
    assert!(
        r.text().contains(&format!("cubactl deny {id}")),
        "{}",
        r.text()
    );
    let p = person(&t).await;
    let denied = p
        .deny(DenyRequest {
            id,
            ask: None,
            reason: Some("no".into()),
        })
        .await
        .expect("the denial");
    assert_eq!(denied.state, ProcState::Denied);
    let w = c
        .call("wait", json!({ "id": id, "timeout_ms": 5_000 }))
        .await;
    assert_eq!(w.state(), "denied", "{}", w.text());
    assert!(!marker.exists());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_question_and_a_password_are_not_put_to_this_user() {
    let mut t = asking().await;
    let (c, mut forms) = eliciting(&mut t, Some(json!({ "decision": "approve_once" }))).await;
    // Started by someone else: this client's wait reports it, and asks nobody.
    let p = person(&t).await;
    let (marker, args) = touch(&t, "theirs");
    let theirs = p
        .spawn(cuba_tests::spawn_req(
            args["command"].as_str().unwrap_or_default(),
        ))
        .await
        .expect("a spawn");
    let w = c
        .call("wait", json!({ "id": theirs.id, "timeout_ms": 5_000 }))
        .await;
    assert_eq!(w.state(), "awaiting_approval", "{}", w.text());
    assert!(
        forms.try_recv().is_err(),
        "asked about another client's command"
    );
    assert!(!marker.exists());
    // A password: only through cubactl. The genuine git asks for a username and a password,
    // as the stand-in server wants credentials.
    let server = cuba_tests::git_http::GitServer::start().await;
    let home = t.path().join("home");
    std::fs::create_dir(&home).expect("a home");
    let text = server.clone_command(&home, &t.path().join("clone"));
    let r = c.call("run", json!({ "command": text })).await;
    assert_eq!(r.state(), "waiting_input", "{}", r.text());
    assert!(
        r.text().contains(&format!("cubactl answer {}", r.id()))
            && r.text().contains("git-remote-http"),
        "{}",
        r.text()
    );
    let id = r.id();
    let mut answered = Vec::new();
    for secret in ["me", "pw"] {
        let asked = || async {
            let info = p.info(id).await.expect("the process");
            info.asks
                .iter()
                .map(|a| a.id)
                .find(|a| !answered.contains(a))
        };
        let waiting =
            cuba_tests::wait_for_async(|| async { asked().await.is_some() }, cuba_tests::STEP);
        assert!(waiting.await, "no question for the {secret}");
        let ask = asked().await;
        p.answer_secret(cuba_protocol::SecretAnswer {
            id,
            ask,
            secret: Some(secret.as_bytes().to_vec()),
        })
        .await
        .expect("the answer");
        answered.extend(ask);
    }
    assert!(
        forms.try_recv().is_err(),
        "a password was asked of the client"
    );
    let done = c.wait_exit(id, 0).await;
    assert!(done.output().contains("git 128"), "{}", done.text());
    assert_eq!(
        server.authorizations(),
        [cuba_tests::git_http::basic("me", "pw")]
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_asks_for_a_password_itself_is_left_to_the_user() {
    let mut t = TestDir::with_daemon().await;
    let c = binary(&mut t, "plain", &[]).await;
    let r = c
        .call(
            "run",
            json!({ "command": "printf 'Password: '; read -r p; echo \"got ${#p}\"" }),
        )
        .await;
    assert_eq!(r.state(), "waiting_input", "{}", r.text());
    let id = r.id();
    assert!(
        r.text().contains(&format!("cubactl attach {id}"))
            && r.text().contains("never send one yourself"),
        "{}",
        r.text()
    );
    c.call("send_signal", json!({ "id": id })).await;
    c.close().await;
}
