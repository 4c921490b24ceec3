//! Finding and signalling a process's whole tree (process facts from `platform::proc`).
//!
//! A tree is: the tracked process, every process in its process group, every process carrying
//! its marker in the environment (a `setsid` + double-fork escapee that reparented to the daemon,
//! or to init after a daemon crash), and all of their descendants. Where the process has its
//! own v2 cgroup, the tree is exactly what the cgroup holds, read at the cost of the tree; the
//! walks below are for where it has none. Every signal goes through a pidfd opened after
//! checking the process's start time, so a reused pid is never hit.

use std::collections::{HashMap, HashSet};

use crate::platform::StartTime;

use crate::platform::cgroup::ProcCgroup;
use crate::platform::proc::{self, ProcStat};
use crate::platform::signal as pid_signal;

/// What knows the tracked processes (the table).
pub trait Tracked {
    /// Where escapees can be, and the tracked processes that are not escapees.
    fn scope(&self) -> Scope;
}

/// Where a tree's members are found.
pub enum Find<'a> {
    /// The process's own cgroup where it has an exact one; else the links from the root and
    /// the daemon's untracked children (the [`Scope`] made only then: it costs a look at
    /// every running record).
    Own {
        cgroup: Option<&'a ProcCgroup>,
        tracked: &'a dyn Tracked,
    },
    /// Every process on the machine (after a restart, when orphans belong to init).
    Scan,
    /// Among the processes of one scan of the machine, shared by many trees.
    Among(&'a [ProcStat]),
}

impl Find<'_> {
    /// The members of `root`'s tree now, as `(pid, start_time)`.
    pub fn members(&self, root: &TreeRoot) -> Vec<(i32, StartTime)> {
        match self {
            Find::Own { cgroup, tracked } => {
                let held = cgroup.filter(|cg| cg.exact()).and_then(|cg| cg.members());
                match held {
                    Some(pids) => {
                        let mut out: Vec<(i32, StartTime)> = pids
                            .into_iter()
                            .filter_map(|pid| proc::live(pid).map(|s| (pid, s.start_time)))
                            .collect();
                        out.sort_unstable();
                        out
                    }
                    None => members_linked(root, &tracked.scope()),
                }
            }
            Find::Scan => members(root, &proc::scan(), None),
            Find::Among(procs) => members(root, procs, None),
        }
    }
}

/// What identifies a tracked tree.
#[derive(Clone, Debug)]
pub struct TreeRoot {
    pub pid: i32,
    pub start_time: StartTime,
    /// `NAME=VALUE` planted in the root's environment.
    pub marker: String,
}

/// Where escapees of a tree can be: children of `parents` (the daemon, a subreaper), other than
/// the `known` tracked processes (whose environments carry their own markers, not worth reading).
#[derive(Debug, Default)]
pub struct Scope {
    pub parents: HashSet<i32>,
    pub known: HashSet<i32>,
}

/// Whether anything of `root`'s tree may be left, without a scan: its process group still has
/// members, or the daemon has a child it does not track (an escapee reparented to it).
pub fn may_have_leftovers(root: &TreeRoot, scope: &Scope) -> bool {
    pid_signal::group_alive(root.pid)
        || proc::own_children()
            .iter()
            .any(|c| !scope.known.contains(c))
}

/// The members of `root`'s tree among `procs` (a scan of the machine), as `(pid, start_time)`.
/// `scope` limits the (costly) environment check to the processes escapees can be; `None`
/// checks every process (after a restart, when orphans belong to init).
pub fn members(
    root: &TreeRoot,
    procs: &[ProcStat],
    scope: Option<&Scope>,
) -> Vec<(i32, StartTime)> {
    let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in procs.iter().enumerate() {
        children.entry(p.ppid).or_default().push(i);
    }
    // Linux does not reuse a pid while a group of that id exists, so the group is ours unless
    // the pid now belongs to another process.
    let group_ours = !procs
        .iter()
        .any(|p| p.pid == root.pid && p.start_time != root.start_time);
    let mut seeds: Vec<usize> = Vec::new();
    for (i, p) in procs.iter().enumerate() {
        let in_root = p.pid == root.pid && p.start_time == root.start_time;
        // The group id is the root's pid: the root leads its own session.
        let in_group = group_ours && p.pgrp == root.pid && p.start_time >= root.start_time;
        let marked = p.pid != root.pid
            && scope.is_none_or(|s| s.parents.contains(&p.ppid) && !s.known.contains(&p.pid))
            && proc::has_env_entry(p.pid, &root.marker);
        if in_root || in_group || marked {
            seeds.push(i);
        }
    }
    let mut seen: HashSet<usize> = HashSet::new();
    while let Some(i) = seeds.pop() {
        if !seen.insert(i) {
            continue;
        }
        if let Some(kids) = children.get(&procs[i].pid) {
            seeds.extend(kids.iter().copied());
        }
    }
    let mut out: Vec<(i32, StartTime)> = seen
        .into_iter()
        .map(|i| (procs[i].pid, procs[i].start_time))
        .collect();
    out.sort_unstable();
    out
}

/// The tree of `root` found by following parent → child links, from the root and from the
/// daemon's untracked children that carry the root's marker (escapees reparented to the
/// subreaper). Its cost is the size of the tree, not of the machine: what the daemon uses while
/// it runs. (After a daemon restart orphans belong to init, and only [`members`] finds them.)
pub fn members_linked(root: &TreeRoot, scope: &Scope) -> Vec<(i32, StartTime)> {
    let mut todo: Vec<i32> = Vec::new();
    if proc::stat(root.pid).is_some_and(|s| s.start_time == root.start_time) {
        todo.push(root.pid);
    }
    for parent in &scope.parents {
        todo.extend(
            proc::children(*parent)
                .into_iter()
                .filter(|c| *c != root.pid && !scope.known.contains(c) && escaped_from(root, *c)),
        );
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if let Some(s) = proc::live(pid) {
            out.push((pid, s.start_time));
        }
        todo.extend(proc::children(pid));
    }
    out.sort_unstable();
    out
}

/// Whether `pid`, a child of the daemon it does not track, came from `root`'s tree: it is in
/// the root's process group, or carries its marker. The group counts even while the
/// environment cannot be read (mid-`execve`, `/proc/PID/environ` can read empty). Linux does
/// not reuse a pid while a group of that id exists, so the group of the root's pid is the
/// root's. `getpgid` first: one system call, where the marker costs reading a file.
fn escaped_from(root: &TreeRoot, pid: i32) -> bool {
    #[cfg(unix)]
    // SAFETY: getpgid has no memory arguments; a gone pid is an error (-1).
    let group = unsafe { libc::getpgid(pid) };
    // Each command starts a process group of its own on Windows too (the Job Object is its
    // exact tree; this path serves a tree found by parents only).
    #[cfg(windows)]
    let group = proc::stat(pid).map_or(-1, |s| s.pgrp);
    group == root.pid || proc::has_env_entry(pid, &root.marker)
}

/// Signals every member of the tree once. Returns how many were signalled.
pub fn signal_tree(root: &TreeRoot, signal: i32, find: &Find) -> usize {
    let mut n = 0;
    for (pid, start) in find.members(root) {
        match pid_signal::signal_exact(pid, start, signal) {
            Ok(true) => n += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(pid, "cannot signal: {e}"),
        }
    }
    n
}

/// Signals every member of the tree but its root (a session's shell keeps running while the
/// command below it is stopped). Returns how many were signalled.
pub fn signal_descendants(root: &TreeRoot, signal: i32, find: &Find) -> usize {
    find.members(root)
        .into_iter()
        .filter(|(pid, _)| *pid != root.pid)
        .filter(|(pid, start)| pid_signal::signal_exact(*pid, *start, signal).unwrap_or(false))
        .count()
}

/// SIGKILLs the tree until no member is left (a member forking while it is killed is caught on
/// the next round). Returns the number of processes killed.
pub fn kill_tree(root: &TreeRoot, find: &Find) -> usize {
    let mut total = 0;
    for _ in 0..50 {
        let n = signal_tree(root, cuba_protocol::Signal::Kill.number(), find);
        if n == 0 {
            break;
        }
        total += n;
    }
    total
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn members_follow_group_marker_and_descendants() {
        let p = |pid, ppid, pgrp, start_time| ProcStat {
            pid,
            ppid,
            pgrp,
            start_time: StartTime(start_time),
        };
        let root = TreeRoot {
            pid: 10,
            start_time: StartTime(100),
            marker: "X=never-present".into(),
        };
        let procs = vec![
            p(1, 0, 1, 1),
            p(10, 5, 10, 100),  // root
            p(11, 10, 10, 101), // child
            p(12, 1, 10, 102),  // group member reparented to init
            p(13, 12, 13, 103), // its child in a new group
            p(20, 1, 20, 50),   // unrelated
        ];
        let m: Vec<i32> = members(&root, &procs, None).iter().map(|m| m.0).collect();
        assert_eq!(m, vec![10, 11, 12, 13]);
    }
}
