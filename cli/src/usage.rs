//! What each running process's tree uses right now: CPU %, resident memory, listening ports.
//! Measured by cubactl from what the system reports, but for the CPU % of a one-shot view,
//! which the daemon gives where it has the tree's cgroup (a rate needs two samples).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use cuba_protocol::ProcessInfo;
use serde::Serialize;

use crate::platform::ports;
use crate::platform::procs::{self, Snapshot};

/// How long a one-shot `ps` or `info` measures CPU use.
pub const SAMPLE: Duration = Duration::from_millis(100);

/// One process tree's usage.
#[derive(Serialize, Clone, Debug, Default)]
pub struct Usage {
    /// Live processes of the tree, the tracked one first.
    pub pids: Vec<i32>,
    /// CPU use of the whole tree between two samples (100 = one core).
    pub cpu_percent: Option<f64>,
    pub rss_bytes: u64,
    /// TCP ports the tree listens on.
    pub listening: Vec<SocketAddr>,
}

/// Which pids belong to which process id at one moment, with their CPU times.
pub struct Sample {
    snapshot: Snapshot,
    trees: HashMap<u64, Vec<i32>>,
}

/// The daemon's instance token (it marks every child's environment), read from its state dir.
pub fn instance(state_dir: &str) -> Option<String> {
    let text =
        cuba_protocol::safe_fs::read_to_string(&Path::new(state_dir).join("instance")).ok()?;
    let t = text.trim();
    (!t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric())).then(|| t.to_string())
}

/// Takes a sample of the trees of `list`'s running processes.
pub fn sample(list: &[ProcessInfo], instance: Option<&str>) -> Sample {
    let snapshot = Snapshot::take();
    let running: Vec<&ProcessInfo> = list
        .iter()
        .filter(|p| !p.state.is_finished() && p.pid > 0)
        .collect();
    let mut marked = match instance {
        Some(i) if !running.is_empty() => procs::marked(i),
        _ => HashMap::new(),
    };
    let trees = running
        .iter()
        .map(|p| {
            let root = p.pid as i32;
            let mut pids = snapshot.tree(root);
            for pid in marked.remove(&p.id).unwrap_or_default() {
                if !pids.contains(&pid) && snapshot.get(pid).is_some_and(|s| !s.zombie) {
                    pids.push(pid);
                }
            }
            // The tracked process first, the rest in pid order.
            pids.sort_unstable_by_key(|&pid| (pid != root, pid));
            (p.id, pids)
        })
        .collect();
    Sample { snapshot, trees }
}

impl Sample {
    /// How long ago it was taken.
    pub fn age(&self) -> Duration {
        self.snapshot.taken.elapsed()
    }

    /// Usage per process id, CPU % measured since `before` when given.
    pub fn usage(&self, before: Option<&Sample>) -> HashMap<u64, Usage> {
        self.trees
            .iter()
            .map(|(&id, pids)| {
                let stats = pids
                    .iter()
                    .filter_map(|&p| self.snapshot.get(p).map(|s| (p, s)));
                let rss_bytes = stats.clone().map(|(_, s)| s.rss_bytes).sum();
                let cpu_percent = before.and_then(|b| {
                    let secs = self
                        .snapshot
                        .taken
                        .duration_since(b.snapshot.taken)
                        .as_secs_f64();
                    if secs <= 0.0 {
                        return None;
                    }
                    // A pid absent from the first sample started in between: all its time is new.
                    let ns: u64 = stats
                        .clone()
                        .map(|(p, s)| {
                            let old = b.snapshot.get(p).map_or(0, |o| o.cpu_ns);
                            s.cpu_ns.saturating_sub(old)
                        })
                        .sum();
                    Some(ns as f64 / 1e9 / secs * 100.0)
                });
                let listening = ports::listening(pids);
                let usage = Usage {
                    pids: pids.clone(),
                    cpu_percent,
                    rss_bytes,
                    listening,
                };
                (id, usage)
            })
            .collect()
    }
}

/// Usage for a one-shot view. CPU % is the daemon's (its cgroup's CPU time since its previous
/// look): one sample here, no wait. Where the daemon has no figure (no cgroup), two samples
/// `SAMPLE` apart.
pub async fn measure(list: &[ProcessInfo], instance: Option<&str>) -> HashMap<u64, Usage> {
    let first = sample(list, instance);
    if first.trees.is_empty() {
        return HashMap::new();
    }
    let running = || list.iter().filter(|p| first.trees.contains_key(&p.id));
    if running().all(|p| p.cpu_millicores.is_some()) {
        let mut usage = first.usage(None);
        for p in running() {
            if let Some(u) = usage.get_mut(&p.id) {
                u.cpu_percent = p.cpu_millicores.map(|m| f64::from(m) / 10.0);
            }
        }
        return usage;
    }
    tokio::time::sleep(SAMPLE).await;
    sample(list, instance).usage(Some(&first))
}

/// The PORTS cell of `p`: the ports its tree listens on, and the port leased to it while
/// nothing listens there yet (`41234(lease)`); `-` for none.
pub fn ports_cell(p: &ProcessInfo, u: Option<&Usage>) -> String {
    let listening = u.map_or(&[][..], |u| &u.listening[..]);
    let mut text = ports_text(listening);
    let lease = p
        .port
        .filter(|l| !p.state.is_finished() && !listening.iter().any(|a| a.port() == *l));
    if let Some(l) = lease {
        if !text.is_empty() {
            text.push(',');
        }
        text.push_str(&format!("{l}(lease)"));
    }
    if text.is_empty() {
        text.push('-');
    }
    text
}

/// Ports for a table cell: `8000,8443`.
pub fn ports_text(addrs: &[SocketAddr]) -> String {
    let mut ports: Vec<u16> = addrs.iter().map(|a| a.port()).collect();
    ports.dedup();
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
