//! Passwords through the askpass helper with the genuine `git` against a stand-in server
//! (`cuba_tests::git_http`): the username and password the person gives with `cubactl answer`
//! reach the server and nothing else (no reply, audit line, spool, journal or log), and the
//! question names git's program and command line; a question refused or unanswered reaches git
//! as none; and an askpass program of the command's own, run by the genuine git, gets nothing
//! while nobody is asked.

use std::path::{Path, PathBuf};

use cuba_protocol::{Ask, AskKind, ProcState};
use cuba_tests::git_http::{basic, GitServer};
use cuba_tests::{machine, spawn_req, wait_exit, Step, TestDaemon};

use super::{ask_lines, audit, cubactl, ended, watch_until};

/// Whether `git` is installed; a skip (a failure in CI) when not.
fn git_here(what: &str) -> bool {
    let found = std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        machine::skip(what, "git is not installed");
    }
    found
}

/// Waits for a password question of process `id` other than `before`'s, and returns it.
async fn question(c: &cuba_protocol::client::Client, id: u64, before: &[u64]) -> Ask {
    let new = |a: &Ask| a.kind == AskKind::Password && !before.contains(&a.id);
    let p = watch_until(c, id, "a password question", |p| p.asks.iter().any(new)).await;
    assert_eq!(p.state, ProcState::WaitingInput, "{p:?}");
    p.asks.into_iter().find(new).unwrap()
}

/// Every file under `dir` that has `text` in it.
fn files_with(dir: &Path, text: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => found.extend(files_with(&path, text)),
            Ok(t) if t.is_file() => {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if bytes.windows(text.len()).any(|w| w == text.as_bytes()) {
                    found.push(path);
                }
            }
            _ => {}
        }
    }
    found
}

/// The audit's refusals of a password ask in process `id` (event `ask`, rule `askpass`).
pub(super) fn refusals(d: &TestDaemon, id: u64) -> Vec<serde_json::Value> {
    audit(d)
        .into_iter()
        .filter(|l| l["event"] == "ask" && l["id"] == id && l["rule"] == "askpass")
        .collect()
}

/// Asserts that no question waits for the person, as `cubactl approvals` shows it.
pub(super) async fn nothing_waits(d: &TestDaemon) {
    let (ok, listed, said) = cubactl(d, &["approvals"], None).await;
    assert!(
        ok && listed.contains("nothing waits for an answer"),
        "{listed}{said}"
    );
}

async fn output(c: &cuba_protocol::client::Client, id: u64) -> String {
    String::from_utf8_lossy(&cuba_tests::read_all(c, id).await).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_goes_from_cubactl_answer_to_the_genuine_git_and_nowhere_else() {
    if !git_here("git's credentials through cubactl answer") {
        return;
    }
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let server = GitServer::start().await;
    let home = d.dir().join("home");
    std::fs::create_dir(&home).unwrap();
    let text = format!(
        "{}; [ \"$SSH_ASKPASS\" = \"$GIT_ASKPASS\" ] && [ \"$SUDO_ASKPASS\" = \"$GIT_ASKPASS\" ] \
         && [ \"$SSH_ASKPASS_REQUIRE\" = force ] && echo helpers",
        server.clone_command(&home, &d.dir().join("clone"))
    );
    let p = c.spawn(spawn_req(&text)).step().await.unwrap();
    let id = p.id.to_string();
    let user = question(&c, p.id, &[]).await;
    assert_eq!(user.what, format!("Username for '{}':", server.origin()));
    // Named as the genuine program that asks (git's HTTP transport) and its command line.
    let shown = format!(
        "git-core/git-remote-http `git-remote-http origin {}`",
        server.url()
    );
    assert!(
        user.rule.starts_with('/') && user.rule.ends_with(&shown),
        "{}",
        user.rule
    );
    let (ok, listed, _) = cubactl(&d, &["approvals"], None).await;
    let line = format!("{} asks for a password ({})", user.rule, user.what);
    assert!(ok && listed.contains(&line), "{listed}");
    // An agent cannot answer it.
    let agent = format!(
        "echo guess | '{}' --socket '{}' answer {id} 2>&1",
        cuba_tests::bin("cubactl").display(),
        d.socket().display(),
    );
    let a = c.spawn(spawn_req(&agent)).step().await.unwrap();
    wait_exit(&c, a.id).await;
    let said = output(&c, a.id).await;
    assert!(
        said.contains("only a person can answer a password question"),
        "{said}"
    );
    // The person does, twice.
    let (ok, _, said) = cubactl(&d, &["answer", &id], Some("user-7\n")).await;
    assert!(ok, "{said}");
    let pass = question(&c, p.id, &[user.id]).await;
    let for_user = server.origin().replace("http://", "http://user-7@");
    assert_eq!(pass.what, format!("Password for '{for_user}':"));
    assert_eq!(pass.rule, user.rule);
    let (ok, _, said) = cubactl(&d, &["answer", &id], Some("s3cret-9\n")).await;
    assert!(ok, "{said}");
    ended(&c, p.id).await;
    let out = output(&c, p.id).await;
    // The server's 404 ends git.
    assert!(out.contains("git 128") && out.contains("helpers"), "{out}");
    assert_eq!(server.authorizations(), [basic("user-7", "s3cret-9")]);
    assert_eq!(
        ask_lines(&d, p.id),
        ["asked", "answered", "asked", "answered"]
    );
    // Nowhere else: not in the reply, nor any file of the daemon's (audit log, journal,
    // spools, log), nor the command's home.
    assert!(!out.contains("s3cret-9"), "{out}");
    for secret in ["s3cret-9", &basic("user-7", "s3cret-9")[6..]] {
        assert_eq!(files_with(d.dir(), secret), Vec::<PathBuf>::new());
    }
    assert!(!d.log().contains("s3cret-9"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_refused_or_unanswered_reaches_git_as_none() {
    if !git_here("git's credentials refused") {
        return;
    }
    let server = GitServer::start().await;
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_APPROVAL_TIMEOUT", "300ms")
        .start()
        .await;
    let c = d.client().await;
    let home = d.dir().join("home");
    std::fs::create_dir(&home).unwrap();
    let text = server.clone_command(&home, &d.dir().join("clone"));
    let p = c.spawn(spawn_req(&text)).step().await.unwrap();
    ended(&c, p.id).await;
    let out = output(&c, p.id).await;
    assert!(
        out.contains("cuba-askpass: no password: ")
            && out.contains("nobody answered within")
            && out.contains("git 128"),
        "{out}"
    );
    let d2 = TestDaemon::start().await;
    let c2 = d2.client().await;
    let q = c2.spawn(spawn_req(&text)).step().await.unwrap();
    question(&c2, q.id, &[]).await;
    let (ok, _, said) = cubactl(&d2, &["answer", &q.id.to_string(), "--refuse"], None).await;
    assert!(ok, "{said}");
    ended(&c2, q.id).await;
    let out = output(&c2, q.id).await;
    assert!(
        out.contains("gave no password") && out.contains("git 128"),
        "{out}"
    );
    assert_eq!(server.authorizations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_askpass_program_of_the_commands_own_gets_nothing_from_the_genuine_git() {
    if !git_here("the agent's own askpass program") {
        return;
    }
    let server = GitServer::start().await;
    // Were it asked, nobody would answer: the test ends in seconds either way.
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_APPROVAL_TIMEOUT", "5s")
        .start()
        .await;
    let c = d.client().await;
    let home = d.dir().join("home");
    std::fs::create_dir(&home).unwrap();
    let stolen = d.dir().join("stolen");
    // A script that runs the real helper and keeps what it prints: the helper's parent is the
    // script's shell, not git.
    let script = d.dir().join("mine");
    let body = format!(
        "#!/bin/sh\nout=$(\"$REAL_ASKPASS\" \"$1\") || exit 1\nprintf '%s\\n' \"$out\" >> '{}'\n\
         printf '%s\\n' \"$out\"\n",
        stolen.display()
    );
    std::fs::write(&script, body).unwrap();
    // A copy of the helper: it speaks the same protocol but is not the helper's file.
    let copy = d.dir().join("askpass-copy");
    std::fs::copy(cuba_tests::bin("cuba-askpass"), &copy).unwrap();
    for file in [&script, &copy] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let ways = [
        (&script, "is not a genuine sudo, ssh or git", sh.clone()),
        (&copy, "is not cuba-askpass", copy.clone()),
    ];
    for (i, (askpass, why, program)) in ways.into_iter().enumerate() {
        let text = format!(
            "export REAL_ASKPASS=\"$GIT_ASKPASS\" GIT_ASKPASS='{}'; {}",
            askpass.display(),
            server.clone_command(&home, &d.dir().join(format!("clone-{i}")))
        );
        let p = c.spawn(spawn_req(&text)).step().await.unwrap();
        ended(&c, p.id).await;
        let out = output(&c, p.id).await;
        assert!(
            out.contains("cuba-askpass: no password: ") && out.contains(why),
            "{out}"
        );
        assert!(out.contains("git 128"), "{out}");
        // Nobody was asked: refused at once, in the audit log with the program judged.
        assert_eq!(ask_lines(&d, p.id), ["refused"]);
        let refused = refusals(&d, p.id);
        assert_eq!(refused[0]["decision"], "refused", "{refused:?}");
        assert_eq!(refused[0]["program"], program.display().to_string());
        nothing_waits(&d).await;
    }
    assert_eq!(server.authorizations(), Vec::<String>::new());
    assert!(!stolen.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_or_preloaded_git_gets_nothing() {
    if !git_here("a traced or preloaded git") {
        return;
    }
    let server = GitServer::start().await;
    // Were it asked, nobody would answer: the test ends in seconds either way.
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_APPROVAL_TIMEOUT", "5s")
        .start()
        .await;
    let c = d.client().await;
    let home = d.dir().join("home");
    std::fs::create_dir(&home).unwrap();
    // A library of the agent's own (an empty file: the loader skips it, the variable stays).
    let lib = d.dir().join("mine.so");
    std::fs::write(&lib, "").unwrap();
    let mut ways = vec![(
        format!("LD_PRELOAD='{}'", lib.display()),
        "was started with LD_PRELOAD=",
    )];
    if std::path::Path::new("/usr/bin/strace").exists() {
        ways.push(("strace -f -o /dev/null".into(), "is being traced"));
    } else {
        machine::skip("a traced git", "strace is not installed");
    }
    for (i, (before, why)) in ways.into_iter().enumerate() {
        let clone = server.clone_command(&home, &d.dir().join(format!("clone-{i}")));
        let text = clone.replacen(" git ", &format!(" {before} git "), 1);
        let p = c.spawn(spawn_req(&text)).step().await.unwrap();
        ended(&c, p.id).await;
        let out = output(&c, p.id).await;
        assert!(
            out.contains("cuba-askpass: no password: ") && out.contains(why),
            "{out}"
        );
        assert_eq!(ask_lines(&d, p.id), ["refused"]);
        nothing_waits(&d).await;
    }
    assert_eq!(server.authorizations(), Vec::<String>::new());
}
