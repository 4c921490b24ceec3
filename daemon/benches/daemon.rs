//! Measures a real `cubad` over its socket: spawn+wait latency of `true` vs. a direct `sh -c`,
//! output drain throughput (2 GiB, beside a plain pipe), and 1000 concurrent `sleep 60`s (start time, daemon RSS).
//! Run with `cargo bench -p cuba-daemon --bench daemon`.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use cuba_protocol::client::Client;
use cuba_protocol::{
    ErrorKind, ListRequest, ProcState, ProcessInfo, Signal, SignalRequest, SpawnRequest,
    StreamFilter, TtySize, WaitReason, WaitRequest, WaitSpec,
};
use tokio::task::JoinSet;

use common::{kill_now, marked_pids, ms, spawn_req, stats, via_run, wait_exit, Daemon};

const LAT_N: usize = 300;
const LAT_WARMUP: usize = 20;
const DRAINED: u64 = 2 << 30;
const DRAIN_RUNS: usize = 3;
const SLEEPERS: usize = 1000;
const CONNS: usize = 8;

/// Spawn then wait: (total, time to the Spawn reply, final record).
async fn via_daemon(c: &Client, command: &str) -> (Duration, Duration, ProcessInfo) {
    let t = Instant::now();
    let p = c.spawn(spawn_req(command)).await.unwrap();
    let spawned = t.elapsed();
    let p = wait_exit(c, p.id).await;
    (t.elapsed(), spawned, p)
}

fn direct(command: &str) -> Duration {
    let t = Instant::now();
    let status = Command::new("/bin/sh").args(["-c", command]).status();
    let status = status.unwrap();
    assert!(status.success(), "{command}: {status}");
    t.elapsed()
}

fn verdict(ok: bool) -> &'static str {
    ["MISS", "PASS"][usize::from(ok)]
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

async fn latency(c: &Client) {
    let (mut daemon, mut spawned, mut waited, mut sh, mut rtt, mut run) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for i in 0..LAT_WARMUP + LAT_N {
        // Alternate which goes first, so neither always runs on a just-warmed cache.
        let first = i % 2 == 0;
        let s0 = if first { None } else { Some(direct("true")) };
        let (d, sp, _) = via_daemon(c, "true").await;
        let r = via_run(c, "true").await;
        let s = s0.unwrap_or_else(|| direct("true"));
        // A request that does nothing: the socket round trip alone.
        let t = Instant::now();
        c.status().await.unwrap();
        if i >= LAT_WARMUP {
            daemon.push(d);
            spawned.push(sp);
            waited.push(d - sp);
            sh.push(s);
            rtt.push(t.elapsed());
            run.push(r);
        }
    }
    let (d, s, r) = (stats(daemon), stats(sh), stats(run));
    println!();
    println!("1) spawn+wait `true`, N={LAT_N} each after {LAT_WARMUP} warm-ups, alternating");
    println!("   {:<30}{:>12}{:>12}{:>12}", "", "median", "p90", "mean");
    for (name, st) in [
        ("via cubad: one Run request", &r),
        ("via cubad: Spawn, then Wait", &d),
        ("direct /bin/sh -c", &s),
        ("  cubad: Spawn reply", &stats(spawned)),
        ("  cubad: then Wait reply", &stats(waited)),
        ("  cubad: DaemonStatus (RTT)", &stats(rtt)),
    ] {
        let [a, b, m] = st.map(ms);
        println!("   {name:<30}{a:>12}{b:>12}{m:>12}");
    }
    let ratio = r[0].as_secs_f64() / s[0].as_secs_f64();
    let two = d[0].as_secs_f64() / s[0].as_secs_f64();
    println!(
        "   ratio of medians, Run: {ratio:.2}x   (target <= 1.5x)  {}   (Spawn+Wait: {two:.2}x)",
        verdict(ratio <= 1.5)
    );
}

async fn drain(c: &Client) {
    let cmd = "head -c 2G /dev/zero";
    let (mut daemon, mut null, mut pipe) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..DRAIN_RUNS {
        let (t, _, p) = via_daemon(c, cmd).await;
        assert_eq!(p.state, ProcState::Exited, "{p:?}");
        assert_eq!(p.stdout_bytes, DRAINED, "{p:?}");
        daemon.push(t);
        null.push(direct(&format!("{cmd} > /dev/null")));
        pipe.push(direct(&format!("{cmd} | cat > /dev/null")));
    }
    println!();
    println!("2) drain 2 GiB of stdout, {DRAIN_RUNS} runs each (median run; best)");
    println!("   {:<36}{:>12}{:>10}{:>10}", "", "wall", "GB/s", "best");
    for (name, v) in [
        ("via cubad (spawn -> Wait reply)", daemon.clone()),
        ("direct: head > /dev/null", null),
        ("direct: head | cat > /dev/null", pipe),
    ] {
        let best = gbps(DRAINED, *v.iter().min().unwrap());
        let med = stats(v)[0];
        let (w, r) = (ms(med), gbps(DRAINED, med));
        println!("   {name:<36}{w:>12}{r:>10.2}{best:>10.2}");
    }
    let rate = gbps(DRAINED, stats(daemon)[0]);
    println!(
        "   cubad: stdout_bytes = {DRAINED} checked; {rate:.2} GB/s (target >= 1 GB/s)  {}",
        verdict(rate >= 1.0)
    );
}

/// 100 MB of build-log lines with one error in the middle: what the scan for error lines
/// (`parts/output/errors.rs`) costs where it looks at every line.
async fn drain_text(c: &Client) {
    const TEXT: u64 = 100_000_000;
    let half = "yes '   Compiling some-crate v1.2.3 (/home/u/src/some-crate)' | head -c 50000000";
    let cmd = format!("{half}; echo 'src/a.ts(3,5): error TS2322: no'; {half}");
    let (mut daemon, mut pipe) = (Vec::new(), Vec::new());
    for _ in 0..DRAIN_RUNS {
        let (t, _, p) = via_daemon(c, &cmd).await;
        assert_eq!(p.state, ProcState::Exited, "{p:?}");
        daemon.push(t);
        pipe.push(direct(&format!("({cmd}) | cat > /dev/null")));
    }
    println!();
    println!("2b) drain 100 MB of log lines, {DRAIN_RUNS} runs each (median run; best)");
    println!("   {:<36}{:>12}{:>10}{:>10}", "", "wall", "GB/s", "best");
    for (name, v) in [
        ("via cubad (spawn -> Wait reply)", daemon),
        ("direct: | cat > /dev/null", pipe),
    ] {
        let best = gbps(TEXT, *v.iter().min().unwrap());
        let med = stats(v)[0];
        println!(
            "   {name:<36}{:>12}{:>10.2}{best:>10.2}",
            ms(med),
            gbps(TEXT, med)
        );
    }
}

async fn list(c: &Client, state: Option<ProcState>) -> Vec<ProcessInfo> {
    let req = ListRequest {
        state,
        ..ListRequest::default()
    };
    c.list(req).await.unwrap()
}

async fn sleepers() {
    let max = (2 * SLEEPERS).to_string();
    let mut daemon = Daemon::start(&[("CUBA_EXEC_MAX_PROCS", &max)]);
    let mut clients = Vec::new();
    for _ in 0..CONNS {
        clients.push(daemon.connect().await);
    }
    let (rss0, _) = daemon.rss_kib();
    let t = Instant::now();
    let mut set = JoinSet::new();
    for i in 0..SLEEPERS {
        // 125 per connection: under the daemon's limit of 256 requests in flight on one.
        let c = clients[i % CONNS].clone();
        set.spawn(async move { c.spawn(spawn_req("sleep 60")).await.unwrap() });
    }
    let mut ids = Vec::new();
    while let Some(p) = set.join_next().await {
        let p = p.unwrap();
        assert_eq!(p.state, ProcState::Running, "{p:?}");
        ids.push(p.id);
    }
    let started = t.elapsed();
    assert_eq!(
        list(&clients[0], Some(ProcState::Running)).await.len(),
        SLEEPERS
    );
    let (rss1, hwm1) = daemon.rss_kib();

    // Pipelined SIGKILLs, acknowledged at once (`wait: false`); a `sleep 60` may run out before
    // its kill is served. Then until neither the table nor /proc shows any of them.
    let t = Instant::now();
    let mut kills = JoinSet::new();
    for (i, id) in ids.iter().enumerate() {
        let (c, id) = (clients[i % CONNS].clone(), *id);
        kills.spawn(async move {
            let req = kill_now(id);
            match c.signal(req).await {
                Ok(_) => 0,
                Err(e) if e.kind() == Some(ErrorKind::InvalidState) => 1,
                Err(e) => panic!("{e}"),
            }
        });
    }
    let mut ended_first = 0;
    while let Some(n) = kills.join_next().await {
        ended_first += n.unwrap();
    }
    let acked = t.elapsed();
    let token = daemon.instance().unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut still = list(&clients[0], Some(ProcState::Running)).await.len();
    while still > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        still = list(&clients[0], Some(ProcState::Running)).await.len();
    }
    let mut left = marked_pids(&token).len();
    while left > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = marked_pids(&token).len();
    }
    let stopped = t.elapsed();
    let all = list(&clients[0], None).await;
    let killed = all.iter().filter(|p| p.state == ProcState::Killed).count();
    let (rss2, hwm2) = daemon.rss_kib();
    let mib = |k: u64| format!("{:.1} MiB", k as f64 / 1024.0);
    let row = |name: &str, value: String| println!("   {name:<42}{value:>16}");
    let target = format!("(target <= 64 MiB)  {}", verdict(rss1 <= 64 << 10));

    println!();
    println!(
        "3) {SLEEPERS} concurrent `sleep 60` (CUBA_EXEC_MAX_PROCS={max}, {CONNS} connections)"
    );
    row("time to start all (pipelined spawns)", ms(started));
    row("  per spawn, amortised", ms(started / SLEEPERS as u32));
    row("cubad VmRSS before", mib(rss0));
    row(&format!("cubad VmRSS with {SLEEPERS} running"), mib(rss1));
    println!("{target:>61}");
    row("cubad VmHWM (peak) then", mib(hwm1));
    row("Signal KILL x1000: all answered", ms(acked));
    row("  of which 'already ended'", ended_first.to_string());
    row("Signal KILL x1000: all ended and gone", ms(stopped));
    row(
        "  final state Killed (not Exited)",
        format!("{killed} of {}", all.len()),
    );
    row(
        "cubad VmRSS after; VmHWM",
        format!("{}; {}", mib(rss2), mib(hwm2)),
    );
    println!("   left running: table {still}, marked processes in /proc {left}");
    assert_eq!((still, left), (0, 0));
}

/// A warm session's command vs. a fresh `run`: spawn+wait of `true`, alternating.
async fn sessions(c: &Client) {
    let in_session = || SpawnRequest {
        command: "true".into(),
        session: Some("bench".into()),
        ..SpawnRequest::default()
    };
    // The first command starts the shell: not part of the figure.
    let p = c.spawn(in_session()).await.unwrap();
    wait_exit(c, p.id).await;
    let (mut warm, mut fresh) = (Vec::new(), Vec::new());
    for i in 0..LAT_WARMUP + LAT_N {
        let t = Instant::now();
        let p = c.spawn(in_session()).await.unwrap();
        let p = wait_exit(c, p.id).await;
        let w = t.elapsed();
        assert_eq!(p.exit_code, Some(0), "{p:?}");
        let (f, _, _) = via_daemon(c, "true").await;
        if i >= LAT_WARMUP {
            warm.push(w);
            fresh.push(f);
        }
    }
    let (w, f) = (stats(warm), stats(fresh));
    println!();
    println!("4) one command `true`, spawn+wait, N={LAT_N} each after {LAT_WARMUP} warm-ups");
    println!("   {:<30}{:>12}{:>12}{:>12}", "", "median", "p90", "mean");
    for (name, st) in [("in a warm session", &w), ("fresh run (new shell)", &f)] {
        let [a, b, m] = st.map(ms);
        println!("   {name:<30}{a:>12}{b:>12}{m:>12}");
    }
    println!(
        "   session / fresh (medians): {:.2}x",
        w[0].as_secs_f64() / f[0].as_secs_f64()
    );
}

/// From a prompt appearing in the output to the daemon reporting `waiting_input`, for a
/// prompt read from a pipe and one read from a terminal.
async fn prompt_to_waiting(c: &Client) {
    const N: usize = 20;
    println!();
    println!("5) prompt appears -> waiting_input reported, N={N} each");
    println!("   {:<30}{:>12}{:>12}{:>12}", "", "median", "p90", "mean");
    let cases = [
        ("pipe: printf; read", "printf 'Name? '; read x", None),
        (
            "tty: bash read -p",
            "bash -c 'read -p \"Name? \" x'",
            Some(cuba_protocol::TtySize::DEFAULT),
        ),
    ];
    for (name, command, tty) in cases {
        let mut took = Vec::new();
        for _ in 0..N {
            let p = c
                .spawn(SpawnRequest {
                    command: command.into(),
                    tty,
                    ..SpawnRequest::default()
                })
                .await
                .unwrap();
            let wait = |until: Option<&str>| WaitRequest {
                id: p.id,
                since: Some(0),
                spec: WaitSpec {
                    until: until.map(str::to_string),
                    quiet_ms: None,
                    timeout_ms: 10_000,
                    max_bytes: 1024,
                    stream: StreamFilter::Both,
                },
            };
            let w = c.wait(wait(Some("Name"))).await.unwrap();
            assert!(matches!(w.reason, WaitReason::Matched(_)), "{w:?}");
            let seen = Instant::now();
            let w = c.wait(wait(None)).await.unwrap();
            assert_eq!(w.reason, WaitReason::WaitingInput, "{w:?}");
            took.push(seen.elapsed());
            c.stdin(p.id, b"x\n".to_vec(), false).await.unwrap();
            wait_exit(c, p.id).await;
        }
        let [a, b, m] = stats(took).map(ms);
        println!("   {name:<30}{a:>12}{b:>12}{m:>12}");
    }
    println!("   (the floor is the quiet period the daemon waits for: 150 ms)");
}

/// `run "echo x"` latency while `yes` floods a terminal (and while a second client polls that
/// terminal's screen too), beside the same with nothing else running: no output source may
/// hold the daemon from other clients' work.
async fn flood(d: &mut Daemon) {
    const N: usize = 60;
    async fn sample(c: &Client) -> Vec<Duration> {
        let mut v = Vec::with_capacity(N);
        for _ in 0..N {
            v.push(via_run(c, "echo x").await);
        }
        v
    }
    let c = d.connect().await;
    let idle = stats_max(sample(&c).await);
    let tty = SpawnRequest {
        tty: Some(TtySize {
            cols: 120,
            rows: 40,
        }),
        ..spawn_req("timeout 60 yes")
    };
    let yes = c.spawn(tty).await.unwrap();
    let flooded = stats_max(sample(&c).await);
    // A second client polls the terminal's screen as an agent watching it would.
    let poller = d.connect().await;
    let id = yes.id;
    let polls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = polls.clone();
    let polling = tokio::spawn(async move {
        while poller.screen(id).await.is_ok() {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let watched = stats_max(sample(&c).await);
    // A finished terminal keeps its screen: the poller stops only when told.
    polling.abort();
    let polls = polls.load(std::sync::atomic::Ordering::Relaxed);
    let stop = SignalRequest {
        id,
        signal: Signal::Kill,
        escalate: false,
        grace_ms: None,
        wait: true,
    };
    c.signal(stop).await.unwrap();
    let out = wait_exit(&c, id).await.stdout_bytes;
    println!();
    println!("6) `run \"echo x\"` beside a terminal flood (`yes` on a tty), N={N} each");
    println!("   {:<34}{:>12}{:>12}", "", "median", "max");
    for (name, [m, x]) in [
        ("nothing else running", idle),
        ("`yes` flooding a terminal", flooded),
        ("  and a client polling its screen", watched),
    ] {
        println!("   {name:<34}{:>12}{:>12}", ms(m), ms(x));
    }
    let ok = |[m, x]: [Duration; 2]| m <= idle[0] * 2 && x <= Duration::from_millis(100);
    println!(
        "   target median <= 2x idle, max <= 100 ms: flood {}, with screen polls {}   ({} \
         MB of terminal output, {polls} screen reads)",
        verdict(ok(flooded)),
        verdict(ok(watched)),
        out / 1_000_000
    );
}

/// Median and max.
fn stats_max(mut v: Vec<Duration>) -> [Duration; 2] {
    v.sort();
    [v[v.len() / 2], v[v.len() - 1]]
}

fn main() {
    // `cargo bench -p cuba-daemon --bench daemon -- sessions input`: only those sections
    // (latency, drain, drain-text, sleepers, sessions, input, flood); none named: all.
    let picked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let run = |name: &str| picked.is_empty() || picked.iter().any(|p| p == name);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load = load.split(' ').take(3).collect::<Vec<_>>().join(" ");
        {
            let mut daemon = Daemon::start(&[]);
            let c = daemon.connect().await;
            let version = &c.welcome().daemon_version;
            println!("cuba-exec daemon bench: cubad {version}, {cpus} CPUs, loadavg {load}");
            if run("latency") {
                latency(&c).await;
            }
            if run("drain") {
                drain(&c).await;
            }
            if run("drain-text") {
                drain_text(&c).await;
            }
            if run("sessions") {
                sessions(&c).await;
            }
            if run("input") {
                prompt_to_waiting(&c).await;
            }
            if run("flood") {
                flood(&mut daemon).await;
            }
        }
        if run("sleepers") {
            sleepers().await;
        }
    });
}
