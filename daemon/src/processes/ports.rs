//! The port watcher: while any process runs, once a second, the TCP ports each running tree
//! listens on (`platform::ports`); a port a tree had not been seen listening on is a
//! `PortOpened` event. With nothing running it sleeps on the table's changes; on an OS that
//! reports no ports it does not run.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::{EventKind, ProcKind};

use crate::parts::tree::Find;
use crate::platform::ports;
use crate::state::record::Proc;
use crate::state::table::Table;

/// How often running trees are looked at.
const PERIOD: Duration = Duration::from_secs(1);
/// Most trees looked at per round (the oldest first): a bound on the work of one round.
const MAX_TREES: usize = 256;
/// Most ports remembered per process: a tree that opens more is not reported further.
const MAX_PORTS: usize = 64;

/// Runs until the task is aborted (the daemon's shutdown).
pub async fn watch(table: Arc<Table>) {
    if !ports::REPORTED {
        return;
    }
    let mut changes = table.subscribe();
    let mut seen: HashMap<u64, HashSet<u16>> = HashMap::new();
    loop {
        changes.borrow_and_update();
        let running = table.running();
        seen.retain(|id, _| running.iter().any(|p| p.id == *id));
        if running.is_empty() {
            if changes.changed().await.is_err() {
                return;
            }
            continue;
        }
        for p in running.iter().take(MAX_TREES) {
            let known = seen.entry(p.id).or_default();
            for port in tree_ports(&table, p) {
                if known.len() < MAX_PORTS && known.insert(port) {
                    table.event(p, EventKind::PortOpened { port });
                }
            }
        }
        tokio::time::sleep(PERIOD).await;
    }
}

/// The ports `p`'s tree listens on now. A command in a session is its shell's tree: reported
/// on the session, none of its own.
pub fn tree_ports(table: &Table, p: &Proc) -> Vec<u16> {
    let (root, cgroup, kind) = {
        let rec = p.lock();
        (rec.root.clone(), rec.cgroup.clone(), rec.info().kind)
    };
    let Some(root) = root.filter(|_| kind != ProcKind::InSession) else {
        return Vec::new();
    };
    let find = Find::Own {
        cgroup: cgroup.as_deref(),
        tracked: table,
    };
    let pids: Vec<i32> = find
        .members(&root)
        .into_iter()
        .map(|(pid, _)| pid)
        .collect();
    ports::listening(&pids)
}
