//! The sandbox's Unix socket rule end to end (`CUBA_EXEC_SANDBOX=workspace-write`): a
//! sandboxed command cannot reach a tmux server outside its roots (which an unsandboxed
//! daemon's command can, so the refusal is the rule's), and the refusal is reported with the
//! socket's path; it reaches the sockets it makes itself (in `/tmp`, a Python forkserver's,
//! an abstract name), a socket under its root and one listed in `unix_sockets`, but not an
//! abstract name made outside its tree.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use cuba_protocol::client::Client;
use cuba_protocol::{ExecBlocked, SpawnRequest};
use cuba_tests::{bounded, spawn_req, spawn_with, text, wait_exit, wait_match, TestDaemon, STEP};

/// What a command left: its exit code, its output, and the refusals in its tree.
struct Ran {
    code: Option<i32>,
    out: String,
    blocked: Vec<ExecBlocked>,
}

async fn run(c: &Client, command: &str, cwd: &Path) -> Ran {
    let req = SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..spawn_req(command)
    };
    let p = spawn_with(c, req).await;
    let done = wait_exit(c, p.id).await;
    Ran {
        code: done.process.exit_code,
        out: text(&done.output.bytes()),
        blocked: done.process.blocked,
    }
}

/// A tmux server on a socket of its own under `/tmp`, started by the test (outside any
/// daemon); killed when dropped.
struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start() -> Tmux {
        let dir = tempfile::Builder::new()
            .prefix("cx-tmux-")
            .tempdir_in("/tmp")
            .unwrap();
        let socket = dir.path().join("sock");
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "cx",
                "sleep 600",
            ])
            .env_remove("TMUX")
            .status()
            .unwrap();
        assert!(status.success(), "tmux did not start");
        Tmux { socket, _dir: dir }
    }

    /// `tmux -S SOCKET ARGS`, as a command's text.
    fn command(&self, args: &str) -> String {
        format!("tmux -S {} {args}", self.socket.display())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

/// A root for the daemon (`CUBA_EXEC_ALLOWED_DIRS`) in a temp dir, links resolved.
fn root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().canonicalize().unwrap().join("work");
    std::fs::create_dir(&work).unwrap();
    (dir, work)
}

/// A listener at `path` that answers each connection with `hello`, on a thread of its own.
fn greeter(path: &Path) {
    let l = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let _ = s.write_all(b"hello");
        }
    });
}

/// A Python command that connects to `path` (as given) and prints what it reads.
fn greeted(path: &str) -> String {
    format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); \
         print(s.recv(5).decode())\""
    )
}

async fn sandboxed(work: &Path, extra: &[(&str, &str)]) -> TestDaemon {
    TestDaemon::builder()
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .env("CUBA_EXEC_ALLOWED_DIRS", work.to_str().unwrap())
        .envs(extra)
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tmux_server_outside_the_roots_is_refused_and_reachable_unsandboxed() {
    let tmux = Tmux::start();
    let (_dir, work) = root();
    let d = sandboxed(&work, &[]).await;
    let c = d.client().await;

    for args in ["list-sessions", "send-keys -t cx 'echo typed' Enter"] {
        let r = run(&c, &tmux.command(args), &work).await;
        assert_ne!(r.code, Some(0), "tmux {args} got through: {}", r.out);
        assert!(r.out.contains("Permission denied"), "{}", r.out);
        let refusal = r
            .blocked
            .iter()
            .find(|b| b.rule == "unix_sockets")
            .unwrap_or_else(|| panic!("no refusal reported: {:?}", r.blocked));
        let expected = format!(
            "connecting to the socket {} is refused in the sandbox (outside the allowed \
             directories; list it in unix_sockets to allow it)",
            tmux.socket.display()
        );
        assert_eq!(refusal.message, expected);
        assert!(
            refusal.line().contains("at a socket call"),
            "{}",
            refusal.line()
        );
    }
    let audit = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"rule\":\"unix_sockets\""), "{audit}");

    // The same from an unsandboxed daemon reaches the server: the refusal was the rule's.
    let plain = TestDaemon::builder()
        .env("CUBA_EXEC_ALLOWED_DIRS", work.to_str().unwrap())
        .start()
        .await;
    let pc = plain.client().await;
    let r = run(&pc, &tmux.command("list-sessions"), &work).await;
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("cx:"), "{}", r.out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sockets_a_command_makes_itself_work() {
    let (_dir, work) = root();
    let d = sandboxed(&work, &[]).await;
    let c = d.client().await;

    // A server and its client in /tmp, one command.
    let script = "import os, socket, tempfile\n\
        p = os.path.join(tempfile.mkdtemp(dir='/tmp'), 's')\n\
        srv = socket.socket(socket.AF_UNIX); srv.bind(p); srv.listen(1)\n\
        c = socket.socket(socket.AF_UNIX); c.connect(p)\n\
        a, _ = srv.accept(); c.sendall(b'ping'); print('got', a.recv(4).decode())\n\
        print(oct(os.stat(p).st_mode & 0o777))\n";
    let r = run(&c, &format!("umask 077; python3 -c \"{script}\""), &work).await;
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("got ping"), "{}", r.out);
    // Made with the command's umask, not the daemon's.
    assert!(r.out.contains("0o700"), "{}", r.out);

    // Python's forkserver: a listener in a temp dir of its own, connected to by each start.
    // (A `Pool` would need semaphores in /dev/shm, which the write confinement refuses.)
    let forked = "import multiprocessing as m\n\
        m.set_start_method('forkserver')\n\
        p = m.Process(target=print, args=('child ok',)); p.start(); p.join()\n\
        print('exit', p.exitcode)\n";
    let r = run(&c, &format!("python3 -c \"{forked}\""), &work).await;
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(
        r.out.contains("child ok") && r.out.contains("exit 0"),
        "{}",
        r.out
    );

    // An abstract name made in the tree is reached; one made outside it is not.
    let name = format!("cx-abstract-{}", std::process::id());
    let outside = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _outside = UnixListener::bind_addr(&outside).unwrap();
    let abs = "import socket, sys\n\
        srv = socket.socket(socket.AF_UNIX); srv.bind('\\0cx-mine-' + sys.argv[1]); srv.listen(1)\n\
        c = socket.socket(socket.AF_UNIX); c.connect('\\0cx-mine-' + sys.argv[1]); print('mine ok')\n\
        o = socket.socket(socket.AF_UNIX)\n\
        try: o.connect('\\0' + sys.argv[2]); print('outside reached')\n\
        except PermissionError: print('outside refused')\n";
    let cmd = format!("python3 -c \"{abs}\" {} {name}", std::process::id());
    let r = run(&c, &cmd, &work).await;
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("mine ok"), "{}", r.out);
    assert!(r.out.contains("outside refused"), "{}", r.out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_under_the_root_and_a_listed_one_work() {
    let (_dir, work) = root();
    let inside = work.join("srv.sock");
    greeter(&inside);
    let outside = tempfile::Builder::new()
        .prefix("cx-sockets-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let listed = outside.path().join("listed.sock");
    let unlisted = outside.path().join("unlisted.sock");
    greeter(&listed);
    greeter(&unlisted);
    let d = sandboxed(
        &work,
        &[("CUBA_EXEC_UNIX_SOCKETS", listed.to_str().unwrap())],
    )
    .await;
    let c = d.client().await;

    let r = run(&c, &greeted(inside.to_str().unwrap()), &work).await;
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("hello"), "{}", r.out);
    // By a relative path, from the command's own directory.
    let r = run(&c, &greeted("srv.sock"), &work).await;
    assert!(r.out.contains("hello"), "{}", r.out);

    let r = run(&c, &greeted(listed.to_str().unwrap()), &work).await;
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("hello"), "{}", r.out);

    let r = run(&c, &greeted(unlisted.to_str().unwrap()), &work).await;
    assert_ne!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("PermissionError"), "{}", r.out);

    // A link under the root to a socket outside it is judged by what it names.
    let link = work.join("link.sock");
    std::os::unix::fs::symlink(&unlisted, &link).unwrap();
    let r = run(&c, &greeted(link.to_str().unwrap()), &work).await;
    assert!(r.out.contains("PermissionError"), "{}", r.out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_and_the_sockets_a_tree_made_survive_an_upgrade() {
    let (_dir, work) = root();
    let outside = tempfile::Builder::new()
        .prefix("cx-sockets-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let theirs = outside.path().join("theirs.sock");
    greeter(&theirs);
    let d = sandboxed(&work, &[]).await;
    let c = d.client().await;
    let script = "import os, socket, sys, tempfile\n\
        p = os.path.join(tempfile.mkdtemp(dir='/tmp'), 's')\n\
        srv = socket.socket(socket.AF_UNIX); srv.bind(p); srv.listen(1)\n\
        print('bound', flush=True); sys.stdin.readline()\n\
        c = socket.socket(socket.AF_UNIX); c.connect(p); print('own ok')\n\
        o = socket.socket(socket.AF_UNIX)\n\
        try: o.connect(sys.argv[1]); print('outside reached')\n\
        except PermissionError: print('outside refused')\n";
    let command = format!("python3 -c \"{script}\" {}", theirs.display());
    let req = SpawnRequest {
        cwd: Some(work.as_os_str().to_owned()),
        ..spawn_req(&command)
    };
    let p = spawn_with(&c, req).await;
    wait_match(&c, p.id, "bound").await;
    let out = bounded(
        "cubactl daemon upgrade",
        STEP,
        d.cubactl(&["daemon", "upgrade"]).output(),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let c = d.client().await;
    bounded("stdin", STEP, c.stdin(p.id, b"go\n".to_vec(), false))
        .await
        .unwrap();
    let done = wait_exit(&c, p.id).await;
    let out = text(&done.output.bytes());
    assert_eq!(done.process.exit_code, Some(0), "{out}");
    assert!(out.contains("own ok"), "{out}");
    assert!(out.contains("outside refused"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_in_a_sandboxed_command_reaches_the_daemon_as_itself() {
    let (_dir, work) = root();
    let d = sandboxed(&work, &[]).await;
    let c = d.client().await;
    // `exec` keeps the shell's pid: the one the daemon must see as the nested client.
    let command = format!(
        "sh -c 'echo pid=$$; exec {} --socket {} run -- echo nested-ok'",
        cuba_tests::bin("cubactl").display(),
        d.socket().display()
    );
    let r = run(&c, &command, &work).await;
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("nested-ok"), "{}", r.out);
    let pid = i64::from(cuba_tests::number_after(&r.out, "pid"));
    let audit = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap();
    let nested = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["event"] == "spawn" && l["command"] == "echo nested-ok")
        .unwrap_or_else(|| panic!("no spawn line for the nested command: {audit}"));
    // The connection was the daemon's own connect, told to be cubactl's.
    assert_eq!(nested["peer_pid"], pid, "{nested}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_that_waits_holds_up_no_other_command() {
    let (_dir, work) = root();
    let d = sandboxed(&work, &[]).await;
    let c = d.client().await;
    // A listener that never accepts, its backlog filled: the next blocking connect waits.
    let script = "import os, socket, tempfile\n\
        p = os.path.join(tempfile.mkdtemp(dir='/tmp'), 's')\n\
        srv = socket.socket(socket.AF_UNIX); srv.bind(p); srv.listen(0)\n\
        held = []\n\
        while True:\n    \
            c = socket.socket(socket.AF_UNIX); c.setblocking(False)\n    \
            try: c.connect(p); held.append(c)\n    \
            except BlockingIOError: break\n\
        print('full', flush=True)\n\
        socket.socket(socket.AF_UNIX).connect(p)\n\
        print('connected')\n";
    let req = SpawnRequest {
        cwd: Some(work.as_os_str().to_owned()),
        ..spawn_req(&format!("python3 -c \"{script}\""))
    };
    let waiting = spawn_with(&c, req).await;
    wait_match(&c, waiting.id, "full").await;
    // Its connect waits on a thread apart: another command's execs and connects go on.
    let r = run(&c, "/bin/echo still-served", &work).await;
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("still-served"), "{}", r.out);
    let info = c.info(waiting.id).await.unwrap();
    assert_eq!(
        info.exit_code, None,
        "the waiting connect returned: {info:?}"
    );
}
