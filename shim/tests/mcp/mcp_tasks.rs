//! Long calls as MCP tasks (`io.modelcontextprotocol/tasks`), through the real `cuba-exec` and
//! rmcp's client declaring the extension: a `run` still going at its yield is a task whose id
//! names the daemon's process; `tasks/get` answers from the daemon (so from another server
//! process too), with the reply `wait` gives once it ended; `tasks/cancel` stops the tree; a
//! client that did not declare the extension gets what it always got.

use crate::common;

use std::time::{Duration, Instant};

use common::mcp::{binary, binary_tasks, Mcp};
use common::{pid_alive, TestDir, STEP};
use rmcp::model::{
    CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult, TaskPayload, TaskStatus,
};
use serde_json::json;

/// The task a call answered with; fails the test on anything else.
fn task_of(r: CallToolResponse) -> rmcp::model::CreateTaskResult {
    match r {
        CallToolResponse::Task(t) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

async fn get(c: &Mcp, task: &str) -> GetTaskResult {
    common::bounded(
        "tasks/get",
        STEP,
        c.service.get_task(GetTaskParams::new(task)),
    )
    .await
    .unwrap_or_else(|e| panic!("tasks/get {task} failed: {e}"))
}

/// Polls `tasks/get` at the interval the task asks for (the extension's own way to learn of
/// an end) until it is no longer working; bounded.
async fn settled(c: &Mcp, task: &str) -> GetTaskResult {
    let deadline = Instant::now() + STEP;
    loop {
        let r = get(c, task).await;
        if r.task.status() != TaskStatus::Working {
            return r;
        }
        assert!(Instant::now() < deadline, "task {task} never ended");
        let every = r.task.task.poll_interval_ms.unwrap_or(1000);
        tokio::time::sleep(Duration::from_millis(every.min(200))).await;
    }
}

/// The text of a completed task's result.
fn result_text(r: &GetTaskResult) -> String {
    match &r.task.payload {
        TaskPayload::Completed { result } => result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        other => panic!("expected a completed task, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_still_going_at_its_yield_is_a_task_that_ends_with_the_wait_reply() {
    let mut t = TestDir::with_daemon().await;
    let c = binary_tasks(&mut t, "tasks-test").await;
    let started = c
        .call_once(
            "run",
            json!({ "command": "echo early; sleep 1; echo done", "yield_ms": 200 }),
        )
        .await;
    let task = task_of(started);
    let id = task.task.task_id.clone();
    assert!(id.starts_with("cuba/"), "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_graphic()), "{id}");
    assert_eq!(task.task.status, TaskStatus::Working);
    assert!(task.task.poll_interval_ms.is_some());
    let note = task
        .meta
        .as_ref()
        .and_then(|m| m.0.get("com.anthropic/agent-task"))
        .and_then(|v| v["modelImmediateResponse"].as_str())
        .unwrap_or_else(|| panic!("no note for the model: {task:?}"))
        .to_string();
    let pid: u64 = id["cuba/".len()..]
        .parse()
        .expect("the task names the process");
    assert!(note.contains(&format!("send_signal(id={pid})")), "{note}");
    let status = task.task.status_message.clone().unwrap_or_default();
    assert!(status.contains("last line: early"), "{status}");

    // The process is the daemon's, in every client's table.
    let rows = c.rows(json!({ "state": "running" })).await;
    assert!(rows.iter().any(|r| r["id"] == json!(pid)), "{rows:?}");

    let done = settled(&c, &id).await;
    assert_eq!(done.task.status(), TaskStatus::Completed);
    let text = result_text(&done);
    assert!(text.starts_with(&format!("[id:{pid} exit:0")), "{text}");
    assert!(text.contains("early\ndone\n"), "{text}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_run_answers_inline_and_a_client_without_tasks_gets_an_id() {
    let mut t = TestDir::with_daemon().await;
    let c = binary_tasks(&mut t, "tasks-test").await;
    match c.call_once("run", json!({ "command": "echo hi" })).await {
        CallToolResponse::Complete(r) => {
            let text = r.content[0].as_text().map(|t| t.text.clone());
            assert_eq!(text.as_deref(), Some("[id:1 exit:0]\nhi\n"));
        }
        other => panic!("a short run is answered inline: {other:?}"),
    }
    c.close().await;

    let plain = binary(&mut t, "no-tasks-test", &[]).await;
    let r = plain
        .call("run", json!({ "command": "sleep 5", "yield_ms": 100 }))
        .await;
    assert_eq!(r.state(), "running", "{}", r.text());
    assert!(r.str("hint").contains("wait(id="), "{}", r.text());
    plain.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_outlives_the_server_process_that_made_it() {
    let mut t = TestDir::with_daemon().await;
    let first = binary_tasks(&mut t, "tasks-test").await;
    let task = task_of(
        first
            .call_once(
                "run",
                json!({ "command": "sleep 1; echo survived", "yield_ms": 100 }),
            )
            .await,
    );
    let id = task.task.task_id;
    // The editor restarts: its server process goes, a new one comes.
    first.close().await;
    let second = binary_tasks(&mut t, "tasks-test").await;
    let done = settled(&second, &id).await;
    assert_eq!(done.task.status(), TaskStatus::Completed);
    assert!(result_text(&done).contains("survived"), "{done:?}");
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_still_going_is_a_task_read_from_its_cursor() {
    let mut t = TestDir::with_daemon().await;
    let c = binary_tasks(&mut t, "tasks-test").await;
    let r = c.start("echo before; sleep 1; echo after").await;
    let pid = r.id();
    let w = c
        .call(
            "wait",
            json!({ "id": pid, "until": "before", "timeout_ms": 10_000 }),
        )
        .await;
    let next = w.u64("next");
    // A wait for a line answers as ever; a plain one past its time is a task.
    let task = task_of(
        c.call_once(
            "wait",
            json!({ "id": pid, "since": next, "timeout_ms": 100 }),
        )
        .await,
    );
    assert_eq!(task.task.task_id, format!("cuba/{pid}.{next}"));
    let done = settled(&c, &task.task.task_id).await;
    let text = result_text(&done);
    assert!(text.contains("after"), "{text}");
    assert!(
        !text.contains("before"),
        "read from the wait's cursor: {text}"
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_task_stops_its_tree() {
    let mut t = TestDir::with_daemon().await;
    let c = binary_tasks(&mut t, "tasks-test").await;
    let command = "sleep 30 & sleep 31 & echo started; wait";
    let task = task_of(
        c.call_once("run", json!({ "command": command, "yield_ms": 300 }))
            .await,
    );
    let id = task.task.task_id;
    let pid: u64 = id["cuba/".len()..].parse().expect("a process id");
    assert!(
        common::wait_for(|| t.marked(pid).len() >= 3, STEP).await,
        "shell and two sleeps: {:?}",
        t.marked(pid)
    );
    let tree = t.marked(pid);
    common::bounded(
        "tasks/cancel",
        STEP,
        c.service.cancel_task(CancelTaskParams::new(id.clone())),
    )
    .await
    .expect("tasks/cancel failed");
    let done = settled(&c, &id).await;
    assert_eq!(done.task.status(), TaskStatus::Cancelled, "{done:?}");
    assert!(
        common::wait_for(|| tree.iter().all(|p| !pid_alive(*p)), STEP).await,
        "processes of the cancelled task survive: {:?}",
        t.marked(pid)
    );
    // A task whose process is gone ends `failed`, saying why (clients drop a task on a
    // JSON-RPC error without telling the model); an id not of ours is an error.
    let gone = get(&c, "cuba/99999").await;
    assert_eq!(gone.task.status(), TaskStatus::Failed, "{gone:?}");
    let why = gone.task.task.status_message.clone().unwrap_or_default();
    assert!(why.contains("no longer in the table"), "{why}");
    let err = c
        .service
        .get_task(GetTaskParams::new("someone-else/1"))
        .await
        .expect_err("a foreign task id");
    assert!(err.to_string().contains("not a task of cuba-exec"), "{err}");
    c.close().await;
}

// `resources/subscribe` is the 2025 eras' way, which this client speaks.
#[allow(deprecated)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribed_process_resource_is_announced_when_it_changes_and_ends() {
    let mut t = TestDir::with_daemon().await;
    let mut c = binary(&mut t, "subscribe-test", &[]).await;
    let pid = c.start("read line; echo got $line").await.id();
    let uri = format!("cuba://process/{pid}/output");
    let subscribe = rmcp::model::SubscribeRequestParams::new(uri.clone());
    common::bounded("resources/subscribe", STEP, c.service.subscribe(subscribe))
        .await
        .expect("resources/subscribe failed");
    // Waiting for input is an event of the log: pushed, not polled.
    let first = common::bounded("an update", STEP, c.updated.recv())
        .await
        .expect("no update after the process waited for input");
    assert_eq!(first, uri);
    c.call("send_input", json!({ "id": pid, "text": "x\n" }))
        .await;
    let ended = common::bounded("the update of its end", STEP, c.updated.recv())
        .await
        .expect("no update after the process ended");
    assert_eq!(ended, uri);
    // A resource that is not a process of ours cannot be subscribed to.
    let bad = rmcp::model::SubscribeRequestParams::new("cuba://process/999999/output");
    let err = c.service.subscribe(bad).await.expect_err("no such process");
    assert!(err.to_string().contains("999999"), "{err}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_outlives_a_daemon_upgrade() {
    let mut t = TestDir::with_daemon().await;
    let c = binary_tasks(&mut t, "tasks-test").await;
    let gate = t.path().join("gate");
    let command = format!(
        "echo before; while [ ! -e '{}' ]; do sleep 0.02; done; echo after",
        gate.display()
    );
    let task = task_of(
        c.call_once("run", json!({ "command": command, "yield_ms": 100 }))
            .await,
    );
    let upgraded = common::bounded(
        "cubactl daemon upgrade",
        STEP,
        tokio::process::Command::new(cuba_tests::bin("cubactl"))
            .args(["daemon", "upgrade"])
            .env("CUBA_EXEC_SOCKET", t.socket())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("cannot run cubactl");
    assert!(
        upgraded.status.success(),
        "{}",
        String::from_utf8_lossy(&upgraded.stderr)
    );
    // The same server process asks the new program, through a new connection.
    let running = get(&c, &task.task.task_id).await;
    assert_eq!(running.task.status(), TaskStatus::Working, "{running:?}");
    std::fs::write(&gate, "").expect("cannot create the gate file");
    let done = settled(&c, &task.task.task_id).await;
    assert!(result_text(&done).contains("before\nafter\n"), "{done:?}");
    c.close().await;
}
