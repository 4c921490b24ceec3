//! Deny-read masks end to end: with `sandbox = "workspace-write"` a command may not read the
//! user's credentials and histories, cuba-exec's own state, or what the person lists in
//! `deny_read`, even where it may write; everything else stays readable, and an unsandboxed
//! daemon's command reads the same files (the refusal came from the masks). `daemon status`
//! and `policy check` show them.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use cuba_tests::{run_in, TestDaemon};

/// A home with secrets, outside `/tmp` (a mask's directories are read at each start, and the
/// temp dir must stay free of them): `~/.ssh/id_ed25519`, `~/.netrc`, `~/.bash_history`, an
/// ordinary `~/notes.txt` and a workspace `~/work` with a `.env` and a `README`.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::Builder::new()
            .prefix("cx-masks-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let h = dir.path();
        std::fs::create_dir_all(h.join(".ssh")).unwrap();
        std::fs::create_dir_all(h.join("work")).unwrap();
        for (f, body) in [
            (".ssh/id_ed25519", "PRIVATE KEY"),
            (".netrc", "machine x password hunter2"),
            (".bash_history", "export TOKEN=abc"),
            ("notes.txt", "ordinary notes"),
            ("work/.env", "API_KEY=sekrit"),
            ("work/README", "readme text"),
        ] {
            std::fs::write(h.join(f), body).unwrap();
        }
        Home { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn work(&self) -> PathBuf {
        self.path().join("work")
    }
}

async fn masked_daemon(home: &Home, extra: &[(&str, &str)]) -> TestDaemon {
    let mut b = TestDaemon::builder()
        .env("HOME", home.path().to_str().unwrap())
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .env("CUBA_EXEC_ALLOWED_DIRS", home.work().to_str().unwrap());
    for (k, v) in extra {
        b = b.env(k, v);
    }
    b.start().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_masks_refuse_credentials_histories_and_the_state_and_leave_the_rest() {
    let home = Home::new();
    let d = masked_daemon(&home, &[]).await;
    let c = d.client().await;
    let work = home.work();
    let h = home.path().display().to_string();
    for secret in [".ssh/id_ed25519", ".netrc", ".bash_history"] {
        let cmd = format!("cat {h}/{secret}");
        let (code, out) = run_in(&c, &cmd, &work).await;
        assert_ne!(code, Some(0), "{secret} must not be readable: {out}");
        assert!(out.contains("Permission denied"), "{secret}: {out}");
        assert!(!out.contains("KEY") && !out.contains("hunter2") && !out.contains("TOKEN"));
    }
    // Other names of a secret: a symlink made inside the workspace, a copy through a pipe.
    let (code, out) = run_in(&c, &format!("ln -s {h}/.ssh/id_ed25519 k && cat k"), &work).await;
    assert_ne!(
        code,
        Some(0),
        "a symlink to a mask is judged at its target: {out}"
    );
    let (code, out) = run_in(&c, &format!("ln {h}/.netrc hard 2>&1; cat hard"), &work).await;
    assert!(
        !out.contains("hunter2"),
        "a hard link gives no way in ({code:?}): {out}"
    );
    // cuba-exec's own state: other commands' output, the journal, the audit.
    let journal = d.state_dir().join("journal.jsonl");
    let cmd = format!("ls {0} >/dev/null && cat {0}/*", d.state_dir().display());
    let (code, out) = run_in(&c, &cmd, &work).await;
    assert_ne!(code, Some(0), "the state directory is masked: {out}");
    assert!(out.contains("Permission denied"), "{out}");
    let _ = journal;
    // What is not masked reads as before: the names in a masked directory, the home, the
    // workspace, the system.
    let cmd = format!("ls {h}/.ssh && cat README /etc/hostname >/dev/null && cat {h}/notes.txt");
    let (code, out) = run_in(&c, &cmd, &work).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("id_ed25519") && out.contains("ordinary notes"),
        "{out}"
    );
    let (code, out) = run_in(&c, "echo new > made && cat made .env", &work).await;
    assert_eq!(
        code,
        Some(0),
        "a file made in the workspace reads back: {out}"
    );
    assert!(
        out.contains("API_KEY"),
        "a workspace .env is not masked by default: {out}"
    );

    // The same reads from an unsandboxed daemon succeed: the refusals came from the masks.
    let plain = TestDaemon::builder()
        .env("HOME", home.path().to_str().unwrap())
        .start()
        .await;
    let pc = plain.client().await;
    let (code, out) = run_in(&pc, &format!("cat {h}/.ssh/id_ed25519 {h}/.netrc"), &work).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("PRIVATE KEY") && out.contains("hunter2"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_mask_holds_where_the_command_may_write_and_status_shows_the_masks() {
    let home = Home::new();
    let env = home.work().join(".env");
    let d = masked_daemon(
        &home,
        &[(
            "CUBA_EXEC_DENY_READ",
            &format!("~/work/.env,{}", "/nonexistent/x"),
        )],
    )
    .await;
    let c = d.client().await;
    let work = home.work();
    let (code, out) = run_in(&c, "cat .env", &work).await;
    assert_ne!(code, Some(0), "a listed mask inside the workspace: {out}");
    assert!(!out.contains("sekrit"), "{out}");
    let (code, out) = run_in(&c, "cp .env /tmp/x-$$ 2>&1; grep -r API_KEY . 2>&1", &work).await;
    assert!(
        !out.contains("sekrit"),
        "no copy, no grep ({code:?}): {out}"
    );
    // The workspace still reads and writes. The cost of a mask in it: a file the command
    // makes directly beside the mask is readable from the next command on.
    let (code, out) = run_in(&c, "cat README && echo n > new", &work).await;
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = run_in(&c, "cat new", &work).await;
    assert_eq!(code, Some(0), "the next command reads it: {out}");
    assert!(
        std::fs::read_to_string(&env).unwrap().contains("sekrit"),
        "untouched"
    );

    let (ok, status, _) = d.ctl(&["daemon", "status"]).await;
    assert!(ok, "{status}");
    assert!(status.contains("reads: everything but"), "{status}");
    assert!(status.contains(&format!("{}", env.display())), "{status}");
    assert!(status.contains(".ssh"), "the defaults are shown: {status}");
    assert!(
        status.contains("once they exist"),
        "absent masks are counted: {status}"
    );
    let (_, check, _) = d.ctl(&["policy", "check", "cat .env"]).await;
    assert!(
        check.contains("in the sandbox:") && check.contains(".env"),
        "{check}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_sandbox_a_deny_read_list_alone_masks_only_what_it_lists() {
    let home = Home::new();
    let d = TestDaemon::builder()
        .env("HOME", home.path().to_str().unwrap())
        .env("CUBA_EXEC_DENY_READ", "~/notes.txt")
        .env("CUBA_EXEC_DENY_READ_DEFAULTS", "false")
        .start()
        .await;
    let c = d.client().await;
    let h = home.path().display().to_string();
    let (code, out) = run_in(&c, &format!("cat {h}/notes.txt"), &home.work()).await;
    assert_ne!(code, Some(0), "{out}");
    let (code, out) = run_in(
        &c,
        &format!("cat {h}/.netrc && echo w > {h}/written"),
        &home.work(),
    )
    .await;
    assert_eq!(
        code,
        Some(0),
        "no default masks, writes not confined: {out}"
    );
    assert!(home.path().join("written").exists());
}
