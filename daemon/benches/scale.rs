//! What a request costs against what runs: with 0, 100, 1000 and 5000 `sleep`s running in a
//! private `cubad`, the latency of a spawn of `true`, a `run "true"`, a list of the whole table
//! (looked at again at once, and after a pause longer than a row's figures are kept: "cold"),
//! the listing `list_processes` asks for (the newest 50 running and 5 finished, cold) and a
//! status of one row; the time to start them and to KILL them all; the daemon's RSS and
//! descriptors. A cost flat in what runs shows as the same latency on every line.
//! `cargo bench -p cuba-daemon --bench scale` (`-- 0 1000` for some sizes only).

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use cuba_protocol::client::Client;
use cuba_protocol::{ErrorKind, ListRequest, ProcState};
use tokio::task::JoinSet;

use common::{kill_now, ms, spawn_req, stats, via_run, wait_exit, Daemon};

const SIZES: [usize; 4] = [0, 100, 1000, 5000];
/// Requests timed per figure (after as many unmeasured).
const N: usize = 40;
/// How long a process started is checked for waiting input.
const SETTLE: Duration = Duration::from_millis(5000);
/// Listings timed after a pause longer than the daemon keeps a row's figures.
const COLD: usize = 8;
/// Connections the sleepers are started and killed over (pipelined, as many clients would).
const CONNS: usize = 8;
/// Requests in flight at once: under the daemon's 256 per connection.
const WAVE: usize = CONNS * 128;

/// Starts `n` `sleep 600`s, pipelined over `clients`: their ids and the time to start them all.
async fn fill(clients: &[Client], n: usize) -> (Vec<u64>, Duration) {
    let t = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for wave in (0..n).collect::<Vec<_>>().chunks(WAVE) {
        let mut set = JoinSet::new();
        for i in wave {
            let c = clients[i % clients.len()].clone();
            set.spawn(async move { c.spawn(spawn_req("sleep 600")).await.unwrap().id });
        }
        while let Some(id) = set.join_next().await {
            ids.push(id.unwrap());
        }
    }
    (ids, t.elapsed())
}

/// SIGKILLs `ids`, pipelined: the time until the table shows none of them running.
async fn kill_all(clients: &[Client], ids: &[u64]) -> Duration {
    let t = Instant::now();
    for (w, wave) in ids.chunks(WAVE).enumerate() {
        kill_wave(clients, wave, w * WAVE).await;
    }
    let running = ListRequest {
        state: Some(ProcState::Running),
        ..ListRequest::default()
    };
    while !clients[0].list(running.clone()).await.unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.elapsed()
}

/// SIGKILLs `ids` at once, acknowledged without waiting for the end; `first`: the index of the
/// first, which picks its connection.
async fn kill_wave(clients: &[Client], ids: &[u64], first: usize) {
    let mut set = JoinSet::new();
    for (i, id) in ids.iter().enumerate() {
        let (c, id) = (clients[(first + i) % clients.len()].clone(), *id);
        set.spawn(async move {
            let req = kill_now(id);
            match c.signal(req).await {
                Ok(_) => {}
                // Ended already, or ended and pruned (the table keeps a bounded number).
                Err(e)
                    if matches!(
                        e.kind(),
                        Some(ErrorKind::InvalidState | ErrorKind::NotFound)
                    ) => {}
                Err(e) => panic!("{e}"),
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
}

/// The median time of `COLD` listings asked for by `req`, each after a pause longer than the
/// daemon keeps a row's figures: every row returned has its cgroup read again.
async fn cold_list(c: &Client, req: ListRequest) -> Duration {
    let mut cold = Vec::with_capacity(COLD);
    for _ in 0..COLD {
        tokio::time::sleep(cuba_daemon::cpu_rate::WINDOW + Duration::from_millis(50)).await;
        let t = Instant::now();
        c.list(req.clone()).await.unwrap();
        cold.push(t.elapsed());
    }
    stats(cold)[0]
}

/// The median of `N` runs of `f` (after `N` unmeasured ones).
async fn median<F, Fut>(mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Duration>,
{
    for _ in 0..N {
        f().await;
    }
    let mut v = Vec::with_capacity(N);
    for _ in 0..N {
        v.push(f().await);
    }
    stats(v)[0]
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

async fn size(n: usize) {
    let max = (n + 4 * N + 100).to_string();
    let mut daemon = Daemon::start(&[("CUBA_EXEC_MAX_PROCS", &max)]);
    let mut clients = Vec::new();
    for _ in 0..CONNS {
        clients.push(daemon.connect().await);
    }
    let (ids, started) = fill(&clients, n).await;
    // Running, not starting: a new process's checks for input waiting (at 0.15 s, then doubling
    // pauses, 4.65 s in all) are over before the requests are timed.
    if n > 0 {
        tokio::time::sleep(SETTLE).await;
    }
    let c = &clients[0];
    let spawn = median(|| async {
        let t = Instant::now();
        let p = c.spawn(spawn_req("true")).await.unwrap();
        let took = t.elapsed();
        wait_exit(c, p.id).await;
        took
    })
    .await;
    let run = median(|| via_run(c, "true")).await;
    let list = median(|| async {
        let t = Instant::now();
        c.list(ListRequest::default()).await.unwrap();
        t.elapsed()
    })
    .await;
    // A listing no one has looked at for longer than the figures are kept: every row's
    // cgroup read again.
    let cold = cold_list(c, ListRequest::default()).await;
    let mcp = ListRequest {
        finished: Some(5),
        running: Some(50),
        ..ListRequest::default()
    };
    let bounded = cold_list(c, mcp).await;
    let one = ids.first().copied().unwrap_or(1);
    let info = median(|| async {
        let t = Instant::now();
        c.info(one).await.unwrap();
        t.elapsed()
    })
    .await;
    let (rss, _) = daemon.rss_kib();
    let fds = open_fds(daemon.child.id());
    let killed = kill_all(&clients, &ids).await;
    let per = |d: Duration| match n {
        0 => "-".to_string(),
        _ => ms(d),
    };
    println!(
        "{n:>6} {:>13} {:>13} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9.1} {fds:>6}",
        per(started),
        per(killed),
        ms(spawn),
        ms(run),
        ms(list),
        ms(cold),
        ms(bounded),
        ms(info),
        rss as f64 / 1024.0
    );
}

fn main() {
    let picked: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("cuba-exec scale bench: {cpus} CPUs; medians of {N} requests");
    println!(
        "{:>6} {:>13} {:>13} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9} {:>6}",
        "procs",
        "start all",
        "KILL all",
        "spawn",
        "run true",
        "list",
        "list cold",
        "MCP list",
        "status",
        "RSS MiB",
        "fds"
    );
    rt.block_on(async {
        for n in SIZES {
            if picked.is_empty() || picked.contains(&n) {
                size(n).await;
            }
        }
    });
}
