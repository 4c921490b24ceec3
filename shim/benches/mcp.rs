//! MCP server figures, on this machine, in one run:
//! `cargo bench -p cuba-exec --bench mcp`.
//!
//! 1. `cuba-exec` start → `tools/list` answered (a daemon is already running), and the bytes
//!    of the tools/list result (budget 8 KB: `../shared/DESIGN.md` §10).
//! 2. `run "echo hi"` through MCP, median over 200 calls, split into the floor (spawning
//!    `/bin/sh -c "echo hi"` directly), the client's round trip (an MCP `ping`) and ours (the
//!    rest), all three interleaved in one loop; and the bytes of its reply.
//! 3. `list_processes` with 0, 200 and 2000 finished records: reply bytes (text and
//!    structured content) and median time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{median, ms, Killed, Shim};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `cubad` on a socket in `dir`, with `env`; returns once it accepts connections.
fn start_daemon(cubad: &Path, dir: &Path, env: &[(&str, &str)]) -> (Killed, PathBuf) {
    let socket = dir.join("s");
    let daemon = Killed(
        Command::new(cubad)
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .envs(env.iter().copied())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cubad"),
    );
    let up = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(10),
            "cubad did not start"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    (daemon, socket)
}

/// 20 `list_processes` calls: the reply's bytes (text and structured content) and the median.
fn listing(shim: &mut Shim) -> (usize, Duration) {
    let list = serde_json::json!({"name": "list_processes", "arguments": {}});
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..20 {
        let t = Instant::now();
        let reply = shim.request("tools/call", list.clone());
        times.push(t.elapsed());
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        let text = v["result"]["content"][0]["text"].as_str().unwrap_or("");
        let sc = serde_json::to_vec(&v["result"]["structuredContent"]).unwrap();
        bytes = text.len() + sc.len();
    }
    (bytes, median(times))
}

fn main() {
    let shim_exe = PathBuf::from(env!("CARGO_BIN_EXE_cuba-exec"));
    let cubad = shim_exe.with_file_name("cubad");
    assert!(
        cubad.exists(),
        "build cubad first: cargo build --release --workspace --bins"
    );
    let dir = tempfile::Builder::new()
        .prefix("cxm")
        // Private, as the daemon requires of its socket and state directories.
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in("/tmp")
        .unwrap();
    let env = [
        ("CUBA_EXEC_MAX_PROCS", "50"),
        ("CUBA_EXEC_MAX_FINISHED", "5000"),
    ];
    let (mut daemon, socket) = start_daemon(&cubad, dir.path(), &env);

    // 1. start → tools/list answered.
    let mut starts = Vec::new();
    let mut list_bytes = 0;
    for _ in 0..20 {
        let t = Instant::now();
        let mut shim = Shim::start(&shim_exe, &socket);
        shim.initialize();
        let reply = shim.request("tools/list", serde_json::json!({}));
        starts.push(t.elapsed());
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        list_bytes = serde_json::to_vec(&v["result"]).unwrap().len();
    }

    // 2. run "echo hi": floor, client round trip and ours, interleaved.
    let mut shim = Shim::start(&shim_exe, &socket);
    shim.initialize();
    let call = serde_json::json!({"name": "run", "arguments": {"command": "echo hi"}});
    let mut reply_text = String::new();
    for _ in 0..20 {
        shim.request("tools/call", call.clone());
    }
    let (mut via_mcp, mut direct, mut ping) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..200 {
        let t = Instant::now();
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg("echo hi")
            .output()
            .unwrap();
        direct.push(t.elapsed());
        assert_eq!(out.stdout, b"hi\n");
        let t = Instant::now();
        shim.request("ping", serde_json::json!({}));
        ping.push(t.elapsed());
        let t = Instant::now();
        let reply = shim.request("tools/call", call.clone());
        via_mcp.push(t.elapsed());
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        reply_text = v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(reply_text.contains("exit:0"), "unexpected reply: {reply}");
    }
    let (m_mcp, m_direct, m_ping) = (median(via_mcp), median(direct), median(ping));
    let ours = ms(m_mcp) - ms(m_direct) - ms(m_ping);

    // 3. list_processes with 0, 200 and 2000 finished records (a fresh daemon table: only
    // this bench's runs are in it, 220 so far).
    let mut listings = Vec::new();
    let mut finished = 220;
    for want in [200, 2000] {
        while finished < want {
            shim.request(
                "tools/call",
                serde_json::json!({"name": "run", "arguments": {"command": "true"}}),
            );
            finished += 1;
        }
        let (bytes, time) = listing(&mut shim);
        listings.push((finished, bytes, time));
    }
    drop(shim);
    // The empty table: a daemon of its own.
    let empty = {
        let dir = tempfile::Builder::new()
            .prefix("cxe")
            // Private, as the daemon requires of its socket and state directories.
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in("/tmp")
            .unwrap();
        let (_d, socket) = start_daemon(&cubad, dir.path(), &[]);
        let mut shim = Shim::start(&shim_exe, &socket);
        shim.initialize();
        let (bytes, time) = listing(&mut shim);
        (0, bytes, time)
    };
    listings.insert(0, empty);
    let _ = daemon.0.kill();

    println!(
        "cuba-exec MCP benchmark ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("{:<46} {:>12} {:>12}", "measure", "value", "target");
    println!(
        "{:<46} {:>10.2}ms {:>12}",
        "start → tools/list answered (median of 20)",
        ms(median(starts)),
        "≤ 30 ms"
    );
    println!(
        "{:<46} {:>11}B {:>12}",
        "tools/list result", list_bytes, "≤ 8192 B"
    );
    println!("run \"echo hi\", medians of 200, interleaved:");
    println!("{:<46} {:>10.3}ms", "  via MCP", ms(m_mcp));
    println!(
        "{:<46} {:>10.3}ms",
        "  floor: sh -c \"echo hi\" direct",
        ms(m_direct)
    );
    println!(
        "{:<46} {:>10.3}ms",
        "  client round trip: MCP ping",
        ms(m_ping)
    );
    println!(
        "{:<46} {:>10.3}ms {:>12}",
        "  ours: the rest", ours, "≤ 0.3 ms"
    );
    let beyond = reply_text.len().saturating_sub("hi\n".len());
    println!(
        "{:<46} {:>11}B {:>12}",
        "  reply text beyond the output", beyond, "≤ 60 B"
    );
    for (n, bytes, t) in listings {
        println!(
            "{:<46} {:>11}B {:>10.3}ms  (≤ 2048 B)",
            format!("list_processes, {n} finished"),
            bytes,
            ms(t)
        );
    }
}
