//! `cubactl --host` reaching a daemon inside a podman container, for real: a container made
//! from an image on first use (cubactl and cubad copied in), one that already runs, one that
//! does not exist, and a container stopped under a call.

use std::process::Output;
use std::time::Instant;

use cuba_protocol::hosts::COPY_DIR;
use cuba_tests::containers::{said, Podman, ENGINE_STEP};
use cuba_tests::{bounded, STEP};
use serde_json::Value;

/// `cubactl --host HOST ARGS…` run to its end (bounded).
async fn at(w: &Podman, host: &str, args: &[&str]) -> Output {
    let mut all = vec!["--host", host];
    all.extend_from_slice(args);
    w.ctl(&all).await
}

/// [`at`] that must succeed: its stdout.
async fn ok_at(w: &Podman, host: &str, args: &[&str]) -> String {
    let out = at(w, host, args).await;
    assert!(
        out.status.success(),
        "cubactl --host {host} {args:?}: {}",
        said(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The row of process `id` in `cubactl --host HOST ps --json`.
async fn row(w: &Podman, host: &str, id: &str) -> Value {
    let out = ok_at(w, host, &["ps", "--json"]).await;
    let rows: Value = serde_json::from_str(&out).expect("ps --json");
    let id: u64 = id.parse().expect("an id");
    rows.as_array()
        .expect("rows")
        .iter()
        .find(|r| r["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no process {id} in {out}"))
}

/// Host `name`'s row of `cubactl hosts --json`.
async fn host_row(w: &Podman, name: &str) -> Value {
    let out = w.ok(&["hosts", "--json"]).await;
    let rows: Value = serde_json::from_str(&out).expect("hosts --json");
    rows.as_array()
        .expect("rows")
        .iter()
        .find(|r| r["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no host {name} in {out}"))
}

/// Polls the daemon inside `name` until it has `n` clients (the question's own included).
async fn clients_become(w: &Podman, name: &str, n: u64) {
    let deadline = Instant::now() + ENGINE_STEP;
    loop {
        let now = w.clients_inside(name).await;
        if now == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon in {name} has {now} clients, not {n}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_host_is_made_and_runs_commands() {
    let Some(mut w) = Podman::new() else { return };
    let name = w.image_host("box");
    let out = ok_at(&w, "box", &["run", "--", "echo", "hi"]).await;
    assert_eq!(out, "hi\n");
    assert_eq!(w.status(&name).await, "running", "made and started");
    for file in ["cubactl", "cubad"] {
        let path = format!("{COPY_DIR}/{file}");
        assert!(w.has_file(&name, &path).await, "{path} copied into {name}");
    }
    let out = at(&w, "box", &["run", "--", "sh -c 'exit 3'"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    // It runs inside: the image's root file system (Debian 12), not this machine's.
    let out = ok_at(&w, "box", &["run", "--", "cat /etc/debian_version"]).await;
    assert!(out.starts_with("12."), "bookworm's release: {out}");
    let host = host_row(&w, "box").await;
    assert_eq!(host["ok"], true, "{host}");
    assert_eq!(host["version"], cuba_protocol::VERSION, "{host}");
    let via = host["via"].as_str().unwrap_or("");
    assert!(via.contains(&format!("podman container {name}")), "{host}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_ps_wait_logs_and_kill_in_a_container() {
    let Some(mut w) = Podman::new() else { return };
    w.image_host("box");
    let id = ok_at(&w, "box", &["start", "--name", "s", "--", "sleep 300"]).await;
    let id = id.trim();
    let ps = ok_at(&w, "box", &["ps"]).await;
    let line = ps.lines().find(|l| l.contains("sleep 300")).unwrap_or("");
    assert!(line.trim_start().starts_with(id), "{ps}");
    assert!(line.contains(" s ") && line.contains("running"), "{ps}");
    let all = w.ok(&["ps", "--all-hosts"]).await;
    let line = all.lines().find(|l| l.contains("sleep 300")).unwrap_or("");
    assert!(all.starts_with("HOST") && line.starts_with("box"), "{all}");
    let printer = ["start", "--", "echo out-line; echo err-line >&2"];
    let printer = ok_at(&w, "box", &printer).await;
    let printer = printer.trim();
    ok_at(&w, "box", &["wait", printer]).await;
    let logs = ok_at(&w, "box", &["logs", printer]).await;
    assert!(
        logs.contains("out-line") && logs.contains("err-line"),
        "{logs}"
    );
    let out = ok_at(&w, "box", &["kill", id]).await;
    assert!(out.contains("killed"), "{out}");
    assert_eq!(row(&w, "box", id).await["state"], "killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_in_a_container_is_typed_into_and_read() {
    let Some(mut w) = Podman::new() else { return };
    w.image_host("box");
    let bash = ["start", "--tty", "-e", "PS1=cx$ ", "--", "bash --norc"];
    let id = ok_at(&w, "box", &bash).await;
    let id = id.trim();
    // Typed once bash is at its prompt: the keys reach readline, not a shell still starting.
    ok_at(&w, "box", &["wait", id, "--until", "cx\\$ ", "-t", "20s"]).await;
    ok_at(&w, "box", &["send", id, "echo $((6*7))"]).await;
    // Not `^42`: readline ends bracketed paste (`\e[?2004l\r`) before the echo prints.
    ok_at(&w, "box", &["wait", id, "--until", "42", "-t", "20s"]).await;
    let screen = ok_at(&w, "box", &["screen", id]).await;
    assert!(screen.lines().any(|l| l.trim() == "42"), "{screen}");
    assert!(screen.contains("cx$ echo $((6*7))"), "{screen}");
    ok_at(&w, "box", &["kill", id]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_stopped_under_a_wait_says_so_and_starts_again() {
    let Some(mut w) = Podman::new() else { return };
    let name = w.image_host("box");
    let id = ok_at(&w, "box", &["start", "--", "sleep 300"]).await;
    let id = id.trim();
    assert_eq!(row(&w, "box", id).await["state"], "running");
    // Only the question itself, once the clients before it have gone; then the wait's, whose
    // handshake is done (the wait request follows at once).
    clients_become(&w, &name, 1).await;
    let wait = w.cubactl(&["--host", "box", "wait", id]).spawn();
    let wait = wait.expect("cubactl wait");
    clients_become(&w, &name, 2).await;
    w.stop(&name).await;
    // The bound is the check: a stopped container ends the call, it does not hang it.
    let out = bounded("cubactl wait", STEP, wait.wait_with_output())
        .await
        .expect("cubactl wait's output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        stderr.contains(&format!("container {name} stopped under this call"))
            && stderr.contains("what ran in it ended with it"),
        "{stderr}"
    );
    // The next command starts it again; the old process ended with the container.
    let again = ok_at(&w, "box", &["run", "--", "echo", "again"]).await;
    assert_eq!(again, "again\n");
    assert_eq!(w.status(&name).await, "running");
    assert_eq!(row(&w, "box", id).await["state"], "lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_container_is_a_host_and_a_stopped_one_names_the_fix() {
    let Some(mut w) = Podman::new() else { return };
    let name = w.existing_host("ext").await;
    let out = ok_at(&w, "ext", &["run", "--", "echo", "hi"]).await;
    assert_eq!(out, "hi\n");
    let copy = format!("{COPY_DIR}/cubactl");
    assert!(w.has_file(&name, &copy).await, "cubactl copied in");
    w.stop(&name).await;
    let out = at(&w, "ext", &["run", "--", "echo", "hi"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        stderr.contains(&format!("container {name} is not running"))
            && stderr.contains(&format!("start it with `podman start {name}`")),
        "{stderr}"
    );
    assert_eq!(
        w.status(&name).await,
        "exited",
        "not started by the product"
    );
    let out = w.podman(&["start", &name]).await;
    assert!(out.status.success(), "{}", said(&out));
    let out = ok_at(&w, "ext", &["run", "--", "echo", "back"]).await;
    assert_eq!(out, "back\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_that_does_not_exist_is_a_clear_error() {
    let Some(mut w) = Podman::new() else { return };
    let name = w.missing_host("nope");
    let out = at(&w, "nope", &["run", "--", "true"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        stderr.contains(&format!("container {name} does not exist"))
            && stderr.contains("podman ps -a"),
        "{stderr}"
    );
    let host = host_row(&w, "nope").await;
    assert_eq!(host["ok"], false, "{host}");
    let state = host["state"].as_str().unwrap_or("");
    assert!(state.contains("does not exist"), "{host}");
    assert_eq!(w.status(&name).await, "", "nothing was made");
}
