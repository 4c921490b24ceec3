//! In-place upgrades, measured:
//! 1) the time from `Upgrade` to the first request the new program answers (the client sees
//!    its connection close and connects again, as every client does);
//! 2) output bytes lost or duplicated across 100 upgrades while a process floods its stdout
//!    (`seq`), read by a cursor reader that reconnects after each one: every line must be the
//!    previous plus one, none missing, none twice.
//!
//! Run with `cargo build --release --workspace --bins && cargo bench -p cuba-tests --bench upgrade`.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{Request, Response, UpgradeRequest};
use cuba_tests::{spawn, TestDaemon};

const UPGRADES: u32 = 100;

fn me() -> cuba_protocol::ClientInfo {
    cuba_protocol::client::this_client(cuba_protocol::ClientKind::Other, "bench")
}

/// Asks for an upgrade and returns the time until the new program answered a status.
async fn upgrade(d: &TestDaemon, before: u32) -> Duration {
    let c = d.client().await;
    let began = Instant::now();
    match c.call(Request::Upgrade(UpgradeRequest::default())).await {
        Ok(Response::Ok) | Err(ClientError::Closed) => {}
        other => panic!("upgrade refused: {other:?}"),
    }
    drop(c);
    loop {
        if let Ok(c) = Client::connect(d.socket(), me()).await {
            if let Ok(s) = c.status().await {
                if s.upgrades > before {
                    return began.elapsed();
                }
                assert!(
                    s.notices.iter().all(|n| !n.contains("upgrade did not")),
                    "{s:?}"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Reads process `id` to its end across upgrades (reconnecting from the last cursor); returns
/// (lines checked, bytes read, lines out of sequence).
async fn read_sequence(d: &TestDaemon, id: u64) -> (u64, u64, u64) {
    let (mut bytes, mut next_line, mut bad) = (0u64, 1u64, 0u64);
    let mut partial: Vec<u8> = Vec::new();
    cuba_tests::follow::follow_across(d, id, |read| {
        for b in read.bytes() {
            bytes += 1;
            if b != b'\n' {
                partial.push(b);
                continue;
            }
            let line: u64 = std::str::from_utf8(&partial)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if line != next_line {
                bad += 1;
            }
            next_line = line + 1;
            partial.clear();
        }
    })
    .await;
    (next_line - 1, bytes, bad)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_SPOOL_SIZE", "1G")
        .start()
        .await;
    let c = d.client().await;
    // About 500 MB of flood at this machine's pace; the upgrades happen while it runs.
    let flood = spawn(&c, "seq 1 60000000").await;
    let reading = read_sequence(&d, flood.id);
    let upgrading = async {
        let mut took = Vec::new();
        for i in 0..UPGRADES {
            took.push(upgrade(&d, i).await);
        }
        took
    };
    let ((lines, bytes, bad), mut took) = tokio::join!(reading, upgrading);
    took.sort();
    println!(
        "upgrade → first answered request ({UPGRADES} upgrades, under a flood): median {:.1} ms, \
         p95 {:.1} ms, max {:.1} ms",
        pct(&took, 0.5).as_secs_f64() * 1e3,
        pct(&took, 0.95).as_secs_f64() * 1e3,
        took.last().unwrap().as_secs_f64() * 1e3
    );
    let c = d.client().await;
    let idle: Vec<_> = {
        for _ in 0..10 {
            spawn(&c, "sleep 300").await;
        }
        let mut took = Vec::new();
        for i in 0..20 {
            took.push(upgrade(&d, UPGRADES + i).await);
        }
        took.sort();
        took
    };
    println!(
        "upgrade → first answered request (20 upgrades, 10 sleeping processes, no flood): \
         median {:.1} ms, max {:.1} ms",
        pct(&idle, 0.5).as_secs_f64() * 1e3,
        idle.last().unwrap().as_secs_f64() * 1e3
    );
    let expected_lines = 60_000_000u64;
    println!(
        "flood across {UPGRADES} upgrades: {bytes} bytes read, {lines} lines; lost {} lines, \
         out of sequence (lost or doubled) {bad}",
        expected_lines.saturating_sub(lines)
    );
}
