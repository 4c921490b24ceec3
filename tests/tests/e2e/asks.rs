//! `ask` decisions end to end, through the protocol and `cubactl`: a command asked about waits
//! in `awaiting_approval` (nothing runs: its marker stays unmade) until a person approves it
//! once or always, denies it with a reason, or nobody does in time; an `ask` program reached
//! through a runtime name or a wrapper no list names is held at its exec; only a person answers
//! (an approval from inside a command's tree is refused); a held command can be stopped; a
//! password goes from `cubactl answer` to the program that asked, through the askpass helper,
//! seen by nothing else; and the real `sudo -A` takes its password that way.

#![allow(clippy::unwrap_used)]

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

/// Waits until process `id` has ended, however long it is held or waits for a password on the
/// way (a wait would end at each question): woken by the table's changes.
async fn ended(c: &Client, id: u64) -> ProcessInfo {
    let mut rows = c
        .subscribe(Request::WatchTable(ListRequest::default()))
        .await
        .unwrap();
    let end = async {
        while let Some(Ok(Response::List(l))) = rows.next().await {
            match l.processes.into_iter().find(|p| p.id == id) {
                Some(p) if p.state.is_finished() => return p,
                _ => {}
            }
        }
        panic!("the table watch ended before process {id} did");
    };
    let p = cuba_tests::bounded(&format!("end of {id}"), Duration::from_secs(30), end).await;
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
    assert!(done.asks.is_empty());
    assert!(c.approvals().await.unwrap().pending.is_empty());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_goes_from_cubactl_answer_to_the_program_and_nowhere_else() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    // What sudo -A, ssh and git do: run the helper with a prompt and read its stdout.
    // What the program read goes to a file (the command text itself is in the audit log).
    let got = d.dir().join("got");
    let text = format!(
        "p=$(\"$SUDO_ASKPASS\" '[sudo] password for me: ') && printf %s \"$p\" > '{}' \
         && echo read; [ \"$SSH_ASKPASS\" = \"$SUDO_ASKPASS\" ] && \
         [ \"$GIT_ASKPASS\" = \"$SUDO_ASKPASS\" ] && [ \"$SSH_ASKPASS_REQUIRE\" = force ] \
         && echo helpers",
        got.display()
    );
    let p = c.spawn(spawn_req(&text)).step().await.unwrap();
    let info = held(&c, p.id).await;
    let ask = &info.asks[0];
    assert_eq!(ask.kind, AskKind::Password);
    assert_eq!(ask.what, "[sudo] password for me:");
    assert_eq!(info.state, ProcState::WaitingInput);
    // An agent cannot answer it.
    let bin = cuba_tests::bin("cubactl");
    let agent = format!(
        "echo guess | '{}' --socket '{}' answer {} 2>&1",
        bin.display(),
        d.socket().display(),
        p.id
    );
    let a = c.spawn(spawn_req(&agent)).step().await.unwrap();
    wait_exit(&c, a.id).await;
    let said = String::from_utf8_lossy(&cuba_tests::read_all(&c, a.id).await).into_owned();
    assert!(
        said.contains("only a person can answer a password question"),
        "{said}"
    );
    // The person does.
    let (ok, _, said) = cubactl(&d, &["answer", &p.id.to_string()], Some("s3cret-9\n")).await;
    assert!(ok, "{said}");
    let done = ended(&c, p.id).await;
    let out = String::from_utf8_lossy(&cuba_tests::read_all(&c, p.id).await).into_owned();
    assert_eq!(done.exit_code, Some(0), "{out}");
    assert!(out.contains("read") && out.contains("helpers"), "{out}");
    assert_eq!(std::fs::read_to_string(&got).unwrap(), "s3cret-9");
    assert_eq!(ask_lines(&d, p.id), ["asked", "answered"]);
    // Written nowhere by the daemon: not in its audit log, journal or log.
    for file in ["audit.jsonl", "journal.jsonl", "cubad.log"] {
        let text = std::fs::read_to_string(d.state_dir().join(file)).unwrap_or_default();
        assert!(!text.contains("s3cret-9"), "{file} has the password");
    }
    assert!(!d.log().contains("s3cret-9"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_refused_or_unanswered_reaches_the_program_as_none() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_APPROVAL_TIMEOUT", "300ms")
        .start()
        .await;
    let c = d.client().await;
    let text = "\"$SUDO_ASKPASS\" 'Password:'; echo \"askpass $?\"";
    let p = c.spawn(spawn_req(text)).step().await.unwrap();
    ended(&c, p.id).await;
    let out = String::from_utf8_lossy(&cuba_tests::read_all(&c, p.id).await).into_owned();
    assert!(
        out.contains("askpass 1") && out.contains("nobody answered within"),
        "{out}"
    );
    let d2 = TestDaemon::start().await;
    let c2 = d2.client().await;
    let q = c2.spawn(spawn_req(text)).step().await.unwrap();
    held(&c2, q.id).await;
    let (ok, _, said) = cubactl(&d2, &["answer", &q.id.to_string(), "--refuse"], None).await;
    assert!(ok, "{said}");
    wait_exit(&c2, q.id).await;
    let out = String::from_utf8_lossy(&cuba_tests::read_all(&c2, q.id).await).into_owned();
    assert!(
        out.contains("askpass 1") && out.contains("gave no password"),
        "{out}"
    );
}

/// A user made for one test, allowed `sudo /usr/bin/true` with its password (asked once, never
/// cached); removed with its sudoers file when dropped.
struct SudoUser {
    name: String,
    uid: u32,
    gid: u32,
    password: String,
    sudoers: std::path::PathBuf,
}

impl SudoUser {
    /// `None` (with why) where this machine cannot: not root, or no `sudo`/`useradd`.
    fn make() -> Result<SudoUser, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("making a user for sudo needs root".into());
        }
        for tool in ["/usr/bin/sudo", "/usr/sbin/useradd", "/usr/sbin/chpasswd"] {
            if !Path::new(tool).exists() {
                return Err(format!("{tool} is not installed"));
            }
        }
        let name = format!("cubasudo{}", std::process::id());
        let run = |cmd: &mut std::process::Command| {
            let out = cmd.output().map_err(|e| e.to_string())?;
            match out.status.success() {
                true => Ok(out),
                false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
            }
        };
        run(std::process::Command::new("/usr/sbin/useradd").args(["-M", "-s", "/bin/sh", &name]))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let sudoers = Path::new("/etc/sudoers.d").join(&name);
        // Dropped (and so removed) from here on, whatever fails next.
        let mut user = SudoUser {
            name: name.clone(),
            uid: 0,
            gid: 0,
            password: format!("pw-{nanos:x}-ok"),
            sudoers: sudoers.clone(),
        };
        let mut chpasswd = std::process::Command::new("/usr/sbin/chpasswd")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        if let Some(mut input) = chpasswd.stdin.take() {
            use std::io::Write;
            writeln!(input, "{name}:{}", user.password).map_err(|e| e.to_string())?;
        }
        if !chpasswd.wait().is_ok_and(|s| s.success()) {
            return Err("chpasswd failed".into());
        }
        let rules = format!(
            "Defaults:{name} !lecture, timestamp_timeout=0, passwd_tries=1\n\
             {name} ALL=(root) /usr/bin/true\n"
        );
        std::fs::write(&sudoers, rules).map_err(|e| e.to_string())?;
        let ids = run(std::process::Command::new("id").args(["-u", &name]))?;
        user.uid = String::from_utf8_lossy(&ids.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        let ids = run(std::process::Command::new("id").args(["-g", &name]))?;
        user.gid = String::from_utf8_lossy(&ids.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        assert!(user.uid != 0 && user.gid != 0, "the new user's ids");
        Ok(user)
    }
}

impl Drop for SudoUser {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.sudoers);
        let _ = std::process::Command::new("pkill")
            .args(["-KILL", "-u", &self.name])
            .status();
        let _ = std::process::Command::new("/usr/sbin/userdel")
            .arg(&self.name)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sudo_dash_a_takes_its_password_from_cubactl_answer() {
    let user = match SudoUser::make() {
        Ok(u) => u,
        Err(why) => return machine::skip("sudo -A through cubactl answer", &why),
    };
    // sudo raises privileges: possible only where execs are not checked (a checked process
    // may never gain any, see `privileges`).
    let d = TestDaemon::builder()
        .as_user(user.uid, user.gid)
        .env("CUBA_EXEC_EXEC_CHECKS", "off")
        .start()
        .await;
    let text = "sudo -A /usr/bin/true && echo sudo-ran; echo \"sudo $?\"";
    for right in [true, false] {
        let (ok, id, said) = cubactl(&d, &["start", text], None).await;
        assert!(ok, "{said}");
        let id = id.trim().to_string();
        // Returns once sudo asks (a password question is a wait for input).
        let (_, _, said) = cubactl(&d, &["wait", &id, "--timeout", "15s"], None).await;
        let prompt = format!("[sudo] password for {}:", user.name);
        assert!(
            said.contains("sudo asks for a password") && said.contains(&format!("answer {id}")),
            "{said}"
        );
        let (ok, listed, _) = cubactl(&d, &["approvals", "--json"], None).await;
        assert!(ok && listed.contains(&prompt), "{listed}");
        let given = match right {
            true => format!("{}\n", user.password),
            false => "wrong\n".to_string(),
        };
        let (ok, _, said) = cubactl(&d, &["answer", &id], Some(&given)).await;
        assert!(ok, "{said}");
        let (_, _, said) = cubactl(&d, &["wait", &id, "--timeout", "15s"], None).await;
        assert!(said.contains("exited"), "{said}");
        let (_, out, _) = cubactl(&d, &["logs", &id], None).await;
        match right {
            true => assert!(out.contains("sudo-ran") && out.contains("sudo 0"), "{out}"),
            false => assert!(!out.contains("sudo-ran") && out.contains("sudo 1"), "{out}"),
        }
    }
    for file in ["audit.jsonl", "journal.jsonl", "cubad.log"] {
        let text = std::fs::read_to_string(d.state_dir().join(file)).unwrap_or_default();
        assert!(!text.contains(&user.password), "{file} has the password");
    }
    assert!(!d.log().contains(&user.password));
    drop(d);
}
