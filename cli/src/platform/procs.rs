//! Every visible process at one moment, the tree under a process, and the processes that carry
//! a daemon's environment marker.
//!
//! The system provides (`os::procs`): `all() -> HashMap<i32, ProcStat>`, `stat(pid) ->
//! Option<ProcStat>`, and `marked(needle) -> HashMap<u64, Vec<i32>>`.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::{os, ProcStat};

/// Every visible process at one moment.
pub struct Snapshot {
    stats: HashMap<i32, ProcStat>,
    children: HashMap<i32, Vec<i32>>,
    pub taken: Instant,
}

impl Snapshot {
    pub fn take() -> Snapshot {
        let stats = os::procs::all();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for (&pid, s) in &stats {
            children.entry(s.ppid).or_default().push(pid);
        }
        Snapshot {
            stats,
            children,
            taken: Instant::now(),
        }
    }

    /// What the snapshot says about `pid` (`None`: it did not exist).
    pub fn get(&self, pid: i32) -> Option<&ProcStat> {
        self.stats.get(&pid)
    }

    fn live(&self, pid: i32) -> bool {
        self.stats.get(&pid).is_some_and(|s| !s.zombie)
    }

    /// `root` and its living descendants (empty when `root` is gone).
    pub fn tree(&self, root: i32) -> Vec<i32> {
        let mut out = Vec::new();
        if !self.live(root) {
            return out;
        }
        let mut todo = vec![root];
        let mut seen = HashSet::new();
        while let Some(pid) = todo.pop() {
            if !seen.insert(pid) {
                continue;
            }
            if self.live(pid) {
                out.push(pid);
            }
            todo.extend(self.children.get(&pid).into_iter().flatten().copied());
        }
        out.sort_unstable();
        out
    }

    /// Living children of `pid`.
    pub fn live_children(&self, pid: i32) -> usize {
        self.children
            .get(&pid)
            .map_or(0, |c| c.iter().filter(|&&p| self.live(p)).count())
    }
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    os::procs::stat(pid).is_some_and(|s| !s.zombie)
}

/// Processes that carry `CUBA_EXEC_PROCESS=<instance>.<id>` in their environment, by id: they
/// belong to that process even after leaving its tree (`setsid`, double fork). Only our own
/// processes' environments are readable, which is all the daemon runs.
pub fn marked(instance: &str) -> HashMap<u64, Vec<i32>> {
    os::procs::marked(&format!("CUBA_EXEC_PROCESS={instance}."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_tree_is_found() {
        let snap = Snapshot::take();
        let me = std::process::id() as i32;
        assert_eq!(snap.tree(me).first(), Some(&me));
        assert!(alive(me));
        assert!(snap.get(me).is_some_and(|s| s.rss_bytes > 0));
    }
}
