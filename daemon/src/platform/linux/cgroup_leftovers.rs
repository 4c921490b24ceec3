//! Start-up's clean-up of per-process cgroups: which ones belong to handed-over processes
//! (kept), the leftovers of an earlier daemon (their processes killed, the cgroups removed),
//! and the highest name in use.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use super::cgroup_budget::is_agent_dir;
use super::cgroup_proc::empty_now;

/// Whether `dir` is the cgroup of a process in `keep` (by name: a v1 id or a v2 leaf).
pub(super) fn kept(dir: &Path, keep: &HashSet<u64>) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|id| keep.contains(&id))
}

/// The highest numbered directory in `base` after start-up's clean-up (a handed-over process's,
/// or a leftover that would not go): new names start above it.
pub(super) fn highest_leaf(base: &Path) -> u64 {
    let mut highest = 0;
    for e in fs::read_dir(base).into_iter().flatten().flatten() {
        let dir = e.path();
        // An agent's processes' cgroups are named from the same counter.
        let n = match is_agent_dir(&dir) {
            true => highest_leaf(&dir),
            false => e
                .file_name()
                .to_str()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
        };
        highest = highest.max(n);
    }
    highest
}

/// Per-process cgroups left under `base` by an earlier daemon of this state directory: their
/// processes (already marked `lost` by the restore) are killed, and the cgroups removed.
pub(super) fn remove_leftovers(base: &Path, keep: &HashSet<u64>) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let dir = e.path();
        if !dir.is_dir() || kept(&dir, keep) {
            continue;
        }
        if is_agent_dir(&dir) {
            // An agent's cgroup goes once its processes' have (it stays for a kept one's).
            remove_leftovers(&dir, keep);
            let _ = fs::remove_dir(&dir);
            continue;
        }
        if !empty_now(&dir) {
            tracing::warn!(
                "{}: a leftover with live processes; killing them",
                dir.display()
            );
        }
        if let Err(e) = fs::remove_dir(&dir) {
            tracing::warn!("cannot remove leftover cgroup {}: {e}", dir.display());
        }
    }
}
