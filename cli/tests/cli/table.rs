//! `ps` and `info`: what another client started is visible, with its tree's ports; colour
//! and help behave.

use crate::common;

use common::{wait_line, Env};
use cuba_protocol::SpawnRequest;

fn agent_spawn(command: &str, name: &str) -> SpawnRequest {
    SpawnRequest {
        command: command.into(),
        name: Some(name.into()),
        ..SpawnRequest::default()
    }
}

#[test]
fn ps_json_shows_what_an_agent_started() {
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let agent = rt.block_on(env.agent()).expect("agent connects");
    let info = rt
        .block_on(agent.spawn(agent_spawn("sleep 300", "devserver")))
        .expect("agent spawns");

    let row = env.row(info.id);
    assert_eq!(row["owner"], "agent");
    assert_eq!(row["owner_kind"], "mcp");
    assert_eq!(row["name"], "devserver");
    assert_eq!(row["command"], "sleep 300");
    assert_eq!(row["state"], "running");
    assert_eq!(row["pid"], info.pid);
    let usage = &row["usage"];
    assert_eq!(usage["pids"][0], info.pid, "{row}");
    assert!(usage["rss_bytes"].as_u64().is_some_and(|r| r > 0), "{row}");
    assert!(usage["cpu_percent"].is_number(), "{row}");

    // Filters, and the table people read.
    let mine = env.ok(&["ps", "--json", "--owner", "cubactl"]);
    assert_eq!(mine.trim(), "[]");
    let table = env.ok(&["ps", "--running", "--owner", "agent"]);
    let header = table.lines().next().unwrap_or_default();
    for col in [
        "ID", "NAME", "OWNER", "STATE", "EXIT", "AGE", "TIME", "CPU%", "RSS", "CPU", "MEM",
        "PORTS", "COMMAND",
    ] {
        assert!(header.contains(col), "{col} missing: {table}");
    }
    assert!(
        table.contains("devserver") && table.contains("agent"),
        "{table}"
    );
    assert!(!table.contains('\x1b'), "no colour into a pipe: {table:?}");
}

#[test]
fn ports_of_the_tree_appear() {
    let env = Env::new();
    // The listener is a child of the shell (`; true` keeps the shell), so ports come from
    // the tree, not only the tracked pid.
    let script = "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\n\
                  print(s.getsockname()[1],flush=True)\ntime.sleep(300)";
    let cmd = format!("python3 -c \"{script}\"; true");
    let id = env.start(&["--name", "listener", "--", &cmd]);
    let port: u16 = wait_line(&env, id, r"^\d+$")
        .parse()
        .expect("a port number");

    let row = env.row(id);
    let listening = row["usage"]["listening"]
        .as_array()
        .expect("listening")
        .clone();
    assert!(
        listening.iter().any(|a| a == &format!("127.0.0.1:{port}")),
        "{port} not in {row}"
    );
    assert!(
        row["usage"]["pids"]
            .as_array()
            .is_some_and(|p| p.len() >= 2),
        "{row}"
    );
    let table = env.ok(&["ps"]);
    assert!(table.contains(&port.to_string()), "{table}");
    let info = env.ok(&["info", &id.to_string()]);
    assert!(info.contains(&format!("127.0.0.1:{port}")), "{info}");
}

#[test]
fn colour_only_when_asked_and_never_with_no_color() {
    let env = Env::new();
    env.start(&["--", "sleep 300"]);
    let forced = env.ok(&["ps", "--color", "always"]);
    assert!(forced.contains("\x1b["), "{forced:?}");
    let out = env
        .cmd()
        .args(["ps"])
        .env("NO_COLOR", "1")
        .output()
        .expect("ps");
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
}

#[test]
fn tables_fit_the_width() {
    let env = Env::new();
    env.start(&[
        "--name",
        "long",
        "--",
        &format!("sleep 300; echo {}", "x".repeat(200)),
    ]);
    let out = env
        .cmd()
        .args(["ps"])
        .env("COLUMNS", "70")
        .output()
        .expect("ps");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().all(|l| l.chars().count() <= 70), "{text}");
    assert!(text.contains('…'), "{text}");
}

#[test]
fn help_completions_and_man_page() {
    let env = Env::new();
    let help = env.ok(&["--help"]);
    for cmd in [
        "ps",
        "ports",
        "info",
        "tail",
        "logs",
        "run",
        "start",
        "kill",
        "send",
        "wait",
        "attach",
        "screen",
        "resize",
        "prune",
        "daemon",
        "completions",
        "man",
        "Exit status",
    ] {
        assert!(help.contains(cmd), "{cmd} missing from --help");
    }
    for shell in ["bash", "zsh", "fish"] {
        let script = env.ok(&["completions", shell]);
        assert!(
            script.contains("cubactl") && script.contains("attach"),
            "{shell}"
        );
        for word in ["screen", "resize", "tty", "session", "cols", "ports"] {
            assert!(script.contains(word), "{shell}: {word} missing");
        }
    }
    let man = env.ok(&["man"]);
    assert!(man.contains(".TH") && man.contains("cubactl"), "{man}");
    let dir = env.dir().join("man");
    env.ok(&["man", "--dir", common::path_str(&dir)]);
    assert!(dir.join("cubactl-ps.1").is_file());
    assert!(dir.join("cubactl-screen.1").is_file());
    assert!(dir.join("cubactl-resize.1").is_file());
    assert!(dir.join("cubactl-ports.1").is_file());
}

#[test]
fn errors_say_what_to_do() {
    let env = Env::new();
    let out = env.output(&["info", "999"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no process with id 999"), "{err}");
    assert!(err.contains("cubactl ps"), "{err}");
    assert_eq!(env.output(&["ps", "--bogus"]).status.code(), Some(2));
    assert_eq!(env.output(&["kill"]).status.code(), Some(2));
    assert_eq!(env.output(&["kill", "999"]).status.code(), Some(1));
}
