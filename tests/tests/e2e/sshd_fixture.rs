//! The real sshd of the host tests: a command runs through `ssh -F <config> ALIAS`, a `SetEnv`
//! of the alias reaches it, an unreachable alias fails fast, servers started at once each get a
//! port of their own, and a dropped server leaves no remote process behind.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cuba_tests::{number_after, pid_alive, text, SshServer, STEP};

/// The remote command's stdout, failing the test (with both logs) unless ssh succeeded.
fn stdout_of(server: &SshServer, out: &Output) -> String {
    assert!(
        out.status.success(),
        "ssh failed ({}): {}; sshd log:\n{}",
        out.status,
        text(&out.stderr),
        server.log()
    );
    text(&out.stdout)
}

#[test]
fn a_command_runs_through_the_alias() {
    let server = SshServer::start();
    server.add_host("box", &[]);
    let out = server.ssh("box", "echo hi");
    assert_eq!(stdout_of(&server, &out), "hi\n");
}

#[test]
fn set_env_of_an_alias_reaches_the_remote_command() {
    let server = SshServer::start();
    let mark = server.dir().display().to_string();
    server.add_host("plain", &[]);
    server.add_host("marked", &[("CUBA_TEST_MARK", &mark)]);
    let remote = "echo \"[$CUBA_TEST_MARK]\"";
    let marked = server.ssh("marked", remote);
    assert_eq!(stdout_of(&server, &marked), format!("[{mark}]\n"));
    // The other alias of the same file has no such variable.
    let plain = server.ssh("plain", remote);
    assert_eq!(stdout_of(&server, &plain), "[]\n");
}

#[test]
fn an_unreachable_alias_fails_fast() {
    let server = SshServer::start();
    server.add_unreachable_host("down");
    let out = server.ssh("down", "echo never");
    assert_eq!(
        out.status.code(),
        Some(255),
        "ssh to a closed port: {out:?}"
    );
    assert!(
        text(&out.stderr).contains("Connection refused"),
        "ssh to a closed port said: {}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "stdout: {}", text(&out.stdout));
}

#[test]
fn servers_started_at_once_get_ports_of_their_own() {
    let starts: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(SshServer::start))
        .collect();
    let servers: Vec<SshServer> = starts
        .into_iter()
        .map(|t| t.join().expect("a server's start panicked"))
        .collect();
    assert_ne!(servers[0].port(), servers[1].port());
    for (i, server) in servers.iter().enumerate() {
        server.add_host("box", &[]);
        let out = server.ssh("box", "echo $SSH_CONNECTION");
        let connection = stdout_of(server, &out);
        // "client-ip client-port server-ip server-port": this server answered.
        assert!(
            connection
                .trim_end()
                .ends_with(&format!(" {}", server.port())),
            "server {i} on port {}: the session says {connection:?}",
            server.port()
        );
    }
}

#[test]
fn a_dropped_server_ends_its_remote_commands() {
    let server = SshServer::start();
    server.add_host("box", &[]);
    let mut client = Command::new("ssh")
        .arg("-F")
        .arg(server.config_path())
        .arg("box")
        .arg("echo remote=$$; exec sleep 300")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start ssh");
    let stdout = client.stdout.take().expect("ssh's stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(STEP).unwrap_or_else(|_| {
        let _ = client.kill();
        panic!(
            "no pid from the remote command; sshd log:\n{}",
            server.log()
        )
    });
    let remote = number_after(&line, "remote");
    assert!(
        pid_alive(remote),
        "the remote command {remote} is not running"
    );
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_alive(remote) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = pid_alive(remote);
    let _ = client.kill();
    let _ = client.wait();
    assert!(!left, "the remote command {remote} outlived its server");
}
