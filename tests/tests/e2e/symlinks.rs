//! Links planted in the daemon's own directories are never followed: each file the daemon or a
//! client opens there (instance, journal and its temporary copy, audit log, lock, client log,
//! hand-over, spool segments, scripts) planted as a link to a canary outside is refused with an
//! error naming it, and the canary stays byte for byte as it was. Start-up files stop the
//! daemon; the others fail their operation and the daemon serves on. Also from inside the
//! sandbox: a `workspace-write` command may write under /tmp, where these directories are.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use cuba_protocol::{paths, ListRequest, SpawnRequest};
use cuba_tests::{
    bin, bounded, spawn, spawn_with, text, wait_exit, wait_for, Step, TestDaemon, STEP,
};
use tempfile::TempDir;

const CANARY: &[u8] = b"canary: nothing may write here\n";

/// A canary file (and an empty directory beside it) outside /tmp, where neither the daemon's
/// directories nor a sandboxed command's writes are.
struct Canary {
    dir: TempDir,
}

impl Canary {
    fn new() -> Canary {
        let dir = tempfile::Builder::new()
            .prefix("cx-canary-")
            .tempdir_in("/var/tmp")
            .unwrap();
        fs::write(dir.path().join("file"), CANARY).unwrap();
        fs::create_dir(dir.path().join("dir")).unwrap();
        Canary { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("file")
    }

    fn dir(&self) -> PathBuf {
        self.dir.path().join("dir")
    }

    /// The file holds what it held, and the directory is still empty.
    fn assert_untouched(&self) {
        let now = fs::read(self.file()).unwrap();
        let shown = String::from_utf8_lossy(&now);
        assert!(now == CANARY, "the canary was written: {shown:?}");
        let inside: Vec<_> = fs::read_dir(self.dir()).unwrap().collect();
        assert!(
            inside.is_empty(),
            "files were made in the canary dir: {inside:?}"
        );
    }
}

/// Replaces whatever is at `path` by a link to `target`.
fn plant(path: &Path, target: &Path) {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path).unwrap(),
        Ok(_) => fs::remove_file(path).unwrap(),
        Err(_) => {}
    }
    symlink(target, path).unwrap();
}

fn refusal(path: &Path) -> String {
    format!(
        "{} is a symbolic link: refusing to follow it; remove it",
        path.display()
    )
}

/// Runs `cubad` on `d`'s socket and state dir in the foreground: it must fail at start-up.
/// Its stderr.
async fn start_fails(d: &TestDaemon) -> String {
    let mut cmd = tokio::process::Command::new(bin("cubad"));
    cmd.arg("--socket")
        .arg(d.socket())
        .arg("--state-dir")
        .arg(d.state_dir())
        .env("CUBA_EXEC_CONFIG", "/dev/null")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = bounded("cubad refusing to start", STEP, cmd.output())
        .await
        .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "cubad started: {err}");
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_files_that_are_links_stop_the_daemon_and_name_the_link() {
    let mut d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "echo kept").await;
    wait_exit(&c, p.id).await;
    drop(c);
    d.kill9();
    let canary = Canary::new();
    let state = d.state_dir().to_path_buf();
    let lock = paths::lock_path(d.socket());
    for path in [state.join("instance"), state.join("journal.jsonl"), lock] {
        let kept = fs::read(&path).unwrap();
        plant(&path, &canary.file());
        let err = start_fails(&d).await;
        assert!(err.contains(&refusal(&path)), "{err}");
        canary.assert_untouched();
        fs::remove_file(&path).unwrap();
        fs::write(&path, kept).unwrap();
    }
    // The state directory itself: its files would be made wherever the link points.
    let real = d.dir().join("state.real");
    fs::rename(&state, &real).unwrap();
    symlink(&real, &state).unwrap();
    let err = start_fails(&d).await;
    assert!(
        err.contains("is a symbolic link: refusing to follow it"),
        "{err}"
    );
    fs::remove_file(&state).unwrap();
    fs::rename(&real, &state).unwrap();

    // All put back: the daemon starts and has what it had.
    d.restart().await;
    let c = d.client().await;
    let list = c.list(ListRequest::default()).step().await.unwrap();
    assert!(list.iter().any(|r| r.id == p.id), "{list:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_copy_and_the_audit_log_are_not_written_through_links() {
    let mut d = TestDaemon::start().await;
    let c = d.client().await;
    wait_exit(&c, spawn(&c, "echo a").await.id).await;
    drop(c);
    d.kill9();
    let (journal_copy, audit) = (Canary::new(), Canary::new());
    let tmp = d.state_dir().join("journal.tmp");
    let log = d.state_dir().join("audit.jsonl");
    plant(&tmp, &journal_copy.file());
    plant(&log, &audit.file());
    // Start-up compacts the journal through journal.tmp: refused, it appends instead.
    d.restart().await;
    let c = d.client().await;
    let b = spawn(&c, "echo b").await;
    wait_exit(&c, b.id).await;
    journal_copy.assert_untouched();
    audit.assert_untouched();
    let text = d.log();
    assert!(text.contains(&refusal(&tmp)), "{text}");
    assert!(text.contains(&refusal(&log)), "{text}");
    let s = c.status().step().await.unwrap();
    assert!(
        s.notices.iter().any(|n| n.starts_with("audit log:")),
        "{:?}",
        s.notices
    );

    // The journal itself took the line: a restarted daemon knows `b`.
    drop(c);
    d.restart().await;
    let c = d.client().await;
    let list = c.list(ListRequest::default()).step().await.unwrap();
    assert!(list.iter().any(|r| r.id == b.id), "{list:?}");
    journal_copy.assert_untouched();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spool_segments_are_not_made_through_links() {
    // Output that fits in memory is never spooled: a small buffer, and more output than that.
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_BUFFER_SIZE", "4K")
        .start()
        .await;
    let c = d.client().await;
    let first = spawn(&c, "seq 1 5000").await;
    wait_exit(&c, first.id).await;
    let canary = Canary::new();
    let spools = d.state_dir().join("spool");
    // The next process's spool directory a link; the one after it a real directory whose first
    // segment file is a link.
    plant(&spools.join((first.id + 1).to_string()), &canary.dir());
    let third = spools.join((first.id + 2).to_string());
    fs::create_dir(&third).unwrap();
    let segment = third.join(format!("{:020}.out", 0));
    plant(&segment, &canary.file());

    for n in 1..=2 {
        let p = spawn(&c, "seq 1 5000").await;
        assert_eq!(p.id, first.id + n);
        let w = wait_exit(&c, p.id).await;
        // The process is not failed: only the disk copy of its output is refused.
        assert_eq!(w.process.exit_code, Some(0), "{:?}", w.process);
    }
    // The spool is written moments after the output is read: until both were refused.
    let refused = [
        refusal(&spools.join((first.id + 1).to_string())),
        refusal(&segment),
    ];
    let both = wait_for(|| refused.iter().all(|r| d.log().contains(r)), STEP).await;
    assert!(both, "{refused:?} not in the log:\n{}", d.log());
    canary.assert_untouched();
}

/// `command` in session `x`, or (`session: None`) on its own: the error it got (a refused
/// start or an ended record).
/// `cubactl daemon upgrade`, which must fail: what it said.
async fn refused_upgrade(d: &TestDaemon) -> String {
    let out = bounded(
        "a refused upgrade",
        STEP,
        d.cubactl(&["daemon", "upgrade"]).output(),
    )
    .await
    .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    err
}

async fn error_of(
    c: &cuba_protocol::client::Client,
    command: &str,
    session: Option<&str>,
) -> String {
    let req = SpawnRequest {
        command: command.to_string(),
        session: session.map(str::to_string),
        ..SpawnRequest::default()
    };
    match c.spawn(req).step().await {
        Err(e) => e.to_string(),
        Ok(p) => {
            let w = wait_exit(c, p.id).await;
            format!("{:?}", w.process.error)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_scripts_are_not_written_through_links() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let req = SpawnRequest {
        session: Some("x".to_string()),
        ..cuba_tests::spawn_req("echo ready")
    };
    let first = spawn_with(&c, req).await;
    wait_exit(&c, first.id).await;
    let canary = Canary::new();
    let scripts = d.state_dir().join("scripts");
    // Whatever ids come next.
    let next: Vec<PathBuf> = (1..=4)
        .map(|n| scripts.join(format!("{}.sh", first.id + n)))
        .collect();
    for path in &next {
        plant(path, &canary.file());
    }
    let err = error_of(&c, "echo planted", Some("x")).await;
    assert!(
        err.contains("is a symbolic link: refusing to follow it"),
        "{err}"
    );
    assert!(
        next.iter().any(|p| err.contains(&p.display().to_string())),
        "{err}"
    );
    canary.assert_untouched();

    // A command too long for an argument runs from a script file too.
    let long = format!(": '{}'", "x".repeat(140_000));
    let err = error_of(&c, &long, None).await;
    assert!(err.contains("cannot write script file"), "{err}");
    assert!(
        err.contains("is a symbolic link: refusing to follow it"),
        "{err}"
    );
    canary.assert_untouched();

    // The directory itself a link: no script is made in the directory it points to.
    plant(&scripts, &canary.dir());
    let err = error_of(&c, "echo planted", Some("x")).await;
    assert!(err.contains(&refusal(&scripts)), "{err}");
    canary.assert_untouched();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hand_over_is_not_written_through_a_link() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let canary = Canary::new();
    let handover = d.state_dir().join("handover");
    plant(&handover, &canary.file());
    let err = refused_upgrade(&d).await;
    assert!(err.contains(&refusal(&handover)), "{err}");
    canary.assert_untouched();
    // The daemon carries on, in the same program (the upgrade closed the connections).
    drop(c);
    let c = d.client().await;
    let s = c.status().step().await;
    let s = s.unwrap_or_else(|e| panic!("{e}; log:\n{}", d.log()));
    assert_eq!((s.pid as i32, s.upgrades), (d.pid(), 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_does_not_start_a_daemon_logging_through_a_link() {
    let dir = tempfile::Builder::new()
        .prefix("cx")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in("/tmp")
        .unwrap();
    let state = dir.path().join("state");
    fs::create_dir(&state).unwrap();
    let canary = Canary::new();
    let log = paths::daemon_log(&state);
    plant(&log, &canary.file());
    let socket = dir.path().join("s");
    let err = autostart_fails(&socket, &state).await;
    assert!(err.contains(&refusal(&log)), "{err}");
    canary.assert_untouched();
    // The state directory itself a link: no log is made in the directory it names.
    plant(&state, &canary.dir());
    let err = autostart_fails(&socket, &state).await;
    assert!(err.contains(&refusal(&state)), "{err}");
    canary.assert_untouched();
    // Nothing was started: no socket.
    assert!(!socket.exists());
}

/// `cubactl ps` with no daemon on `socket`: it must fail to start one. Its stderr.
async fn autostart_fails(socket: &Path, state: &Path) -> String {
    let mut cmd = tokio::process::Command::new(bin("cubactl"));
    cmd.arg("ps")
        .env("CUBA_EXEC_SOCKET", socket)
        .env("CUBA_EXEC_STATE_DIR", state)
        .env("CUBA_EXEC_DAEMON", bin("cubad"))
        .env("CUBA_EXEC_CONFIG", "/dev/null")
        .kill_on_drop(true);
    let out = bounded("cubactl ps", STEP, cmd.output()).await.unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    err
}

/// Runs `command` in `cwd` to its end: its id, exit code and output.
async fn run_in(
    c: &cuba_protocol::client::Client,
    command: &str,
    cwd: &Path,
) -> (u64, Option<i32>, String) {
    let req = SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..cuba_tests::spawn_req(command)
    };
    let p = spawn_with(c, req).await;
    let done = wait_exit(c, p.id).await;
    (p.id, done.process.exit_code, text(&done.output.bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_a_sandboxed_command_plants_in_the_state_dir_are_not_followed() {
    let root = tempfile::tempdir().unwrap();
    let work = root.path().canonicalize().unwrap();
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .env("CUBA_EXEC_ALLOWED_DIRS", work.to_str().unwrap())
        .env("CUBA_EXEC_BUFFER_SIZE", "4K")
        .start()
        .await;
    let c = d.client().await;
    let canary = Canary::new();
    // The sandbox keeps the command itself from the canary...
    let write = format!("echo x >> {}", canary.file().display());
    let (id, code, out) = run_in(&c, &write, &work).await;
    assert_ne!(code, Some(0), "the sandbox let the command write: {out}");
    // ...but the state directory is under /tmp, which it may write: it plants links there for
    // the next process's spool and for the hand-over.
    let state = d.state_dir();
    let spool = state.join("spool").join((id + 2).to_string());
    let handover = state.join("handover");
    let plant = format!(
        "mkdir -p {spools} && ln -s {dir} {spool} && ln -s {file} {handover}",
        spools = state.join("spool").display(),
        dir = canary.dir().display(),
        spool = spool.display(),
        file = canary.file().display(),
        handover = handover.display(),
    );
    let (_, code, out) = run_in(&c, &plant, &work).await;
    assert_eq!(code, Some(0), "the links were not planted: {out}");
    assert!(fs::symlink_metadata(&spool)
        .unwrap()
        .file_type()
        .is_symlink());

    let (next, code, _) = run_in(&c, "seq 1 5000", &work).await;
    assert_eq!((next, code), (id + 2, Some(0)));
    let refused = refusal(&spool);
    assert!(
        wait_for(|| d.log().contains(&refused), STEP).await,
        "{refused} not in the log:\n{}",
        d.log()
    );
    let err = refused_upgrade(&d).await;
    assert!(err.contains(&refusal(&handover)), "{err}");
    canary.assert_untouched();
}
