//! Peer-pid ancestry: a connection made from inside one of this daemon's process trees (an
//! agent's command running `cubactl`, or talking to the socket itself) is held to the policy of
//! the client that started that tree, intersected with its own, never a fresh human's.
//!
//! The peer pid comes from the transport at accept (`SO_PEERCRED`; the pipe's client on Windows,
//! where a tree's Job Object says who is in it). Its environment, then each ancestor's (up
//! the ppid chain to pid 1), is searched for this daemon's marker
//! `CUBA_EXEC_PROCESS=<instance>.<id>`, which every descendant of a managed process inherits.
//! Reaching the daemon itself without a marker means an escapee that cleared its environment
//! and was reparented to us (the subreaper): its process group may still name its tree. When the
//! tree is ours but its owner cannot be told (record pruned or restored, peer already gone), the
//! conservative rule applies: the intersection of every recorded process's policy, logged.

use std::sync::Arc;

use cuba_protocol::ClientInfo;

use crate::base::policy::{Effective, Policy};
#[cfg(unix)]
use crate::platform::proc;
use crate::state::table::Table;

/// Ancestors walked at most (a chain is never this deep; a bound against a cycle of reused pids).
#[cfg(unix)]
const MAX_DEPTH: usize = 1024;

/// Where a connection comes from, decided at accept.
pub enum Origin {
    /// Not from inside any tree of this daemon.
    Outside,
    /// From inside process `id`'s tree, whose owner had `policy`.
    Process { id: u64, policy: Arc<Effective> },
    /// From inside one of our trees (or unverifiable), owner unknown: why.
    Unknown(String),
}

/// The process id in this daemon's marker in `pid`'s environment, if any.
#[cfg(unix)]
fn marker_id(pid: i32, prefix: &[u8]) -> Option<u64> {
    let id = proc::env_entry_after(pid, prefix)?;
    std::str::from_utf8(&id).ok()?.parse().ok()
}

/// The live record and policy of process `id`, when it still has one.
#[cfg(unix)]
fn owner(table: &Table, id: u64) -> Option<Arc<Effective>> {
    table.get(id).ok()?.lock().policy.clone()
}

/// Finds where a peer comes from. `None` (no credentials) is treated as outside: `server.rs`
/// only serves peers whose credentials it could read.
#[cfg(unix)]
pub fn origin(table: &Table, peer: Option<i32>) -> Origin {
    let Some(pid) = peer.filter(|p| *p > 0) else {
        return Origin::Outside;
    };
    let prefix = table.marker_prefix().into_bytes();
    let mut groups = Vec::new();
    let mut cur = pid;
    for depth in 0..MAX_DEPTH {
        if cur <= 1 {
            return Origin::Outside;
        }
        if cur == table.daemon_pid() as i32 {
            // An escapee that dropped its marker and was reparented to the daemon.
            let by_group = table.all().into_iter().find(|p| {
                let data = p.lock();
                data.root.as_ref().is_some_and(|r| groups.contains(&r.pid))
            });
            return match by_group.map(|p| (p.id, p.lock().policy.clone())) {
                Some((id, Some(policy))) => Origin::Process { id, policy },
                Some((id, None)) => Origin::Unknown(format!("process {id} has no policy record")),
                None => Origin::Unknown(format!(
                    "peer pid {pid} descends from cubad without a marker"
                )),
            };
        }
        if let Some(id) = marker_id(cur, &prefix) {
            return match owner(table, id) {
                Some(policy) => Origin::Process { id, policy },
                None => Origin::Unknown(format!(
                    "peer pid {pid} is in the tree of process {id}, whose record is gone"
                )),
            };
        }
        let Some(stat) = proc::stat(cur) else {
            if depth == 0 {
                // Gone before we could look: a connection handed on by a process that exited
                // cannot be placed, so it gets the conservative rule.
                return Origin::Unknown(format!("peer pid {pid} is gone"));
            }
            return Origin::Outside;
        };
        groups.push(stat.pgrp);
        cur = stat.ppid;
    }
    Origin::Unknown(format!("peer pid {pid}: ancestry deeper than {MAX_DEPTH}"))
}

/// Finds where a peer comes from on Windows: a process is inside a tree of ours exactly when
/// it is in that tree's Job Object, which nothing in it can leave (the jobs allow no
/// breakaway), so no environment marker or parent chain is needed.
#[cfg(windows)]
pub fn origin(table: &Table, peer: Option<i32>) -> Origin {
    let Some(pid) = peer.filter(|p| *p > 0) else {
        return Origin::Outside;
    };
    for p in table.all() {
        let (job, policy) = {
            let data = p.lock();
            (data.cgroup.clone(), data.policy.clone())
        };
        let members = job.and_then(|j| j.members()).unwrap_or_default();
        if members.contains(&pid) {
            return match policy {
                Some(policy) => Origin::Process { id: p.id, policy },
                None => Origin::Unknown(format!("process {} has no policy record", p.id)),
            };
        }
    }
    Origin::Outside
}

/// The policy a connection is held to: the daemon's, narrowed by the client's own settings, and
/// by its tree's owner's policy when it comes from inside one.
pub fn effective(
    table: &Table,
    daemon: &Policy,
    origin: &Origin,
    client: &ClientInfo,
) -> Effective {
    let own = Effective::daemon(daemon).narrow_env(&client.name, &client.env);
    match origin {
        Origin::Outside => own,
        Origin::Process { id, policy } => {
            tracing::debug!(id, client = %client.name, "connection from inside a managed tree");
            own.meet(
                policy,
                &format!("owner of process {id}, whose tree this connection comes from"),
            )
        }
        Origin::Unknown(why) => {
            // Every record still in the table, finished ones too: an escapee outlives its root.
            let live: Vec<Arc<Effective>> = table
                .all()
                .iter()
                .filter_map(|p| p.lock().policy.clone())
                .collect();
            tracing::warn!(
                client = %client.name,
                live = live.len(),
                "connection from a managed tree whose owner is unknown ({why}): held to the \
                 daemon policy narrowed by every recorded process's policy"
            );
            live.iter().fold(own, |acc, p| {
                acc.meet(
                    p,
                    "a recorded process; the connection's own tree is unknown",
                )
            })
        }
    }
}
