//! Hosts, measured over a real `sshd` on 127.0.0.1 (the remote daemon is a second `cubad` on
//! this machine, reached through `ssh` and `cubactl bridge` as another machine's would be):
//! 1) `run "echo hi"` through the host's kept connection vs. this machine's daemon,
//! 2) 200 MB of output drained through the bridge vs. plain `ssh host 'head …' > /dev/null`,
//! 3) the time to the first reply from a new host (the ssh handshake, paid once).
//!
//! Run with `cargo build --release --workspace --bins && cargo bench -p cuba-tests --bench hosts`.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cuba_protocol::client::{this_client, Client};
use cuba_protocol::hosts::{Bridge, HostSpec, Hosts, Pool};
use cuba_protocol::{
    ClientKind, FollowRequest, ProcState, Request, Response, RunRequest, StreamFilter, WaitSpec,
};
use cuba_tests::sshd::SshServer;
use cuba_tests::{bin, spawn_req, TestDaemon};

const RUNS: usize = 200;
const WARMUP: usize = 20;
const DRAIN: u64 = 200_000_000;
const DRAIN_RUNS: usize = 3;
const FIRST_RUNS: usize = 5;

fn me() -> cuba_protocol::ClientInfo {
    this_client(ClientKind::Other, "bench")
}

fn box_spec(sshd: &SshServer) -> HostSpec {
    HostSpec {
        name: "box".into(),
        bridge: Bridge::Ssh {
            dest: "box".into(),
            options: vec!["-F".into(), sshd.config_path().display().to_string()],
        },
        remote_bin: Some(bin("cubactl").display().to_string()),
        cwd: None,
        keepalive: None,
    }
}

fn pool(local: &TestDaemon, sshd: &SshServer) -> Pool {
    let mut hosts = Hosts::default();
    hosts.insert(box_spec(sshd));
    Pool::new(local.socket().to_path_buf(), hosts)
}

async fn run_echo(c: &Client) -> Duration {
    let req = RunRequest {
        spawn: spawn_req("echo hi"),
        wait: WaitSpec {
            until: None,
            quiet_ms: None,
            timeout_ms: 10_000,
            max_bytes: 4096,
            stream: StreamFilter::Both,
        },
    };
    let t = Instant::now();
    let w = c.run(req).await.unwrap().result().await.unwrap();
    let took = t.elapsed();
    assert_eq!(w.output.bytes(), b"hi\n");
    took
}

fn median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 9 / 10])
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

async fn latency(local: &Client, remote: &Client) {
    let mut l = Vec::new();
    let mut r = Vec::new();
    for i in 0..WARMUP + RUNS {
        // Interleaved, so both see the same machine load.
        let (a, b) = (run_echo(local).await, run_echo(remote).await);
        if i >= WARMUP {
            l.push(a);
            r.push(b);
        }
    }
    let ((lm, l9), (rm, r9)) = (median(l), median(r));
    println!("1) run \"echo hi\", {RUNS} each (median, p90)");
    println!("   this machine's daemon     {:>10} {:>10}", us(lm), us(l9));
    println!("   host over ssh (kept link) {:>10} {:>10}", us(rm), us(r9));
    let extra = rm.saturating_sub(lm);
    println!(
        "   remote - local: {}  (goal <= 1 ms)  {}",
        us(extra),
        if extra <= Duration::from_millis(1) {
            "ok"
        } else {
            "MISSED"
        }
    );
}

/// Starts `head -c DRAIN /dev/zero` on the host and follows its output to the end.
async fn drain_through(c: &Client) -> Duration {
    let t = Instant::now();
    let p = c
        .spawn(spawn_req(&format!("head -c {DRAIN} /dev/zero")))
        .await
        .unwrap();
    let follow = FollowRequest {
        id: p.id,
        since: Some(0),
        backlog: 0,
        stream: StreamFilter::Both,
    };
    let mut frames = c.subscribe(Request::Follow(follow)).await.unwrap();
    let mut got = 0u64;
    let mut end = None;
    while let Some(frame) = frames.next().await {
        match frame.unwrap() {
            Response::Output(o) => {
                assert_eq!(o.dropped, 0, "bytes dropped before they were read");
                got += o.chunks.iter().map(|c| c.data.len() as u64).sum::<u64>();
            }
            Response::Process(info) => end = Some(info),
            other => panic!("unexpected {other:?}"),
        }
    }
    let took = t.elapsed();
    assert_eq!(got, DRAIN);
    assert_eq!(end.map(|p| p.state), Some(ProcState::Exited));
    took
}

fn plain_ssh(sshd: &SshServer) -> Duration {
    let t = Instant::now();
    let status = Command::new("ssh")
        .arg("-F")
        .arg(sshd.config_path())
        .arg("box")
        .arg(format!("head -c {DRAIN} /dev/zero"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    t.elapsed()
}

fn mbps(d: Duration) -> f64 {
    DRAIN as f64 / d.as_secs_f64() / 1e6
}

async fn drain(remote: &Client, sshd: &SshServer) {
    let (mut via, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..DRAIN_RUNS {
        via.push(drain_through(remote).await);
        plain.push(plain_ssh(sshd));
    }
    let (v, _) = median(via);
    let (p, _) = median(plain);
    println!();
    println!("2) 200 MB of output from the host, {DRAIN_RUNS} runs each (median)");
    println!(
        "   through the bridge (spawn, Follow to the end) {:>8.0} MB/s",
        mbps(v)
    );
    println!(
        "   plain ssh box 'head -c 200M /dev/zero' > /dev/null {:>8.0} MB/s",
        mbps(p)
    );
    println!("   bridge / plain: {:.2}", mbps(v) / mbps(p));
}

async fn first_reply(local: &TestDaemon, sshd: &SshServer) {
    let mut v = Vec::new();
    for _ in 0..FIRST_RUNS {
        // A new pool each time: nothing kept, as for a client that just started.
        let p = pool(local, sshd);
        let t = Instant::now();
        let c = p.client(Some("box"), me).await.unwrap();
        c.status().await.unwrap();
        v.push(t.elapsed());
    }
    let (m, _) = median(v.clone());
    let max = v.iter().max().copied().unwrap_or_default();
    println!();
    println!(
        "3) first reply from a new host (ssh handshake + cubad hello + status), {FIRST_RUNS} runs"
    );
    println!("   median {}  worst {}", us(m), us(max));
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let local = TestDaemon::start().await;
    // Room for the whole drain in the host's spool, so every byte can be read back.
    let remote = TestDaemon::builder()
        .env("CUBA_EXEC_SPOOL_SIZE", "256M")
        .start()
        .await;
    let sshd = SshServer::start();
    sshd.add_daemon_host("box", &remote);
    let p = pool(&local, &sshd);
    let here = p.client(None, me).await.unwrap();
    let there = p.client(Some("box"), me).await.unwrap();
    latency(&here, &there).await;
    drain(&there, &sshd).await;
    first_reply(&local, &sshd).await;
}
