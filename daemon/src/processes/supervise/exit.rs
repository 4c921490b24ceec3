//! The end of a process under its supervisor: stopping its tree (on request, at its timeout, or
//! what it left behind), publishing its exit through the table, and the final clean-up.

use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::Signal;
use tokio::time::Instant;

use super::{Supervisor, ABANDON_AFTER};

/// How long the cgroup may take to empty after `cgroup.kill` (the kernel is quick; this bounds
/// a stuck uninterruptible sleep).
const EMPTY_WITHIN: Duration = Duration::from_secs(2);
use crate::parts::tree;
use crate::platform::cgroup::ProcCgroup;
use crate::platform::Exit;
use crate::state::record::{Outcome, Proc, StopCause, Writer};
use crate::state::table::Table;

impl Supervisor<'_> {
    /// The tracked process exited: its end is published now; whatever of its tree is left
    /// behind is stopped (TERM, grace, KILL), and the pipes drained until they close.
    pub(super) fn on_exit(&mut self, status: Exit) {
        tracing::debug!(id = self.p.id, ?status, "exited");
        self.exited = true;
        // What its tree's execs met before the exit is in the row the exit publishes.
        self.p.take_notes();
        let (stop, cgroup) = {
            let rec = self.p.lock();
            (rec.stop, rec.cgroup.clone())
        };
        let mut outcome = Outcome::of_exit(stop, status);
        // Whether anything is left in the cgroup, asked once; before the usage is read, so an
        // empty cgroup's usage is final.
        let populated = cgroup
            .as_ref()
            .filter(|cg| cg.exact())
            .map(|cg| cg.populated());
        if let Some(cg) = &cgroup {
            // Read at the exit, before the row is final: the kernel counted its OOM kill.
            if let Some(why) = cg.oom_reason() {
                self.report_limit(self.p, "memory", why.clone());
                outcome.error = Some(why);
            }
            if let Some(why) = cg.budget_reached() {
                self.report_limit(self.p, "budget", why);
            }
            self.p.lock().set_usage(cg.final_usage());
        }
        self.cgroup_empty = populated == Some(false);
        self.table.finish(self.p, outcome);
        if let Some(route) = self.route.as_mut() {
            route.shell_ended(self.p);
            self.cmd_kill_at = None;
            self.cmd_abandon_at = None;
            self.cmd_reinterrupt = None;
        }
        // Nothing leaks: most processes leave nothing, and two cheap checks say so without
        // walking the process table.
        let root = self.p.lock().root.clone();
        let left = match (root, populated) {
            // Exact: anything left is in the cgroup. Counted at least once, so the KILL
            // (`cgroup.kill`) follows the grace even if the walk finds nothing to TERM.
            (Some(_), Some(true)) => self
                .signal_tree(cuba_protocol::Signal::Term.number())
                .max(1),
            (Some(_), Some(false)) => 0,
            (Some(root), _) if tree::may_have_leftovers(&root, &self.table.scope()) => {
                self.signal_tree(cuba_protocol::Signal::Term.number())
            }
            _ => 0,
        };
        if left > 0 {
            tracing::debug!(
                id = self.p.id,
                left,
                "stopping what the process left behind"
            );
            if populated == Some(true) {
                self.emptying = cgroup;
            }
            self.kill_at = Some(Instant::now() + self.grace);
            self.abandon_at = Some(Instant::now() + self.grace + ABANDON_AFTER);
        } else {
            // Nothing is left: a KILL a stop request armed has nothing to do.
            self.kill_at = None;
            self.abandon_at = Some(Instant::now() + ABANDON_AFTER);
        }
    }

    /// Its hard time limit passed: the tree is stopped gracefully, and it ends `timed_out`.
    pub(super) fn timed_out(&mut self) {
        let limit = self.p.lock().info().timeout_ms.unwrap_or(0);
        let detail = format!("ran past its timeout of {limit} ms: stopped (TERM, then KILL)");
        self.report_limit(self.p, "timeout", detail);
        self.mark_stopped(StopCause::Timeout);
        self.signal(Signal::Term, Some(self.grace));
    }

    /// Records why the process is being stopped (the first reason wins), which decides the
    /// state it ends in.
    pub(super) fn mark_stopped(&mut self, cause: StopCause) {
        let mut rec = self.p.lock();
        if rec.stop.is_none() && !rec.finished() {
            rec.stop = Some(cause);
        }
    }

    pub(super) fn signal(&mut self, signal: Signal, grace: Option<Duration>) {
        if signal == Signal::Kill {
            self.kill_now();
            return;
        }
        self.signal_tree(signal.number());
        if let Some(grace) = grace {
            let at = Instant::now() + grace;
            self.kill_at = Some(self.kill_at.map_or(at, |k| k.min(at)));
        }
    }

    pub(super) fn signal_tree(&self, signal: i32) -> usize {
        match self.tree() {
            Some((root, cgroup)) => tree::signal_tree(&root, signal, &self.find(cgroup.as_deref())),
            None => 0,
        }
    }

    /// The tracked process's tree: its root and its cgroup.
    pub(super) fn tree(&self) -> Option<(tree::TreeRoot, Option<Arc<ProcCgroup>>)> {
        let rec = self.p.lock();
        Some((rec.root.clone()?, rec.cgroup.clone()))
    }

    /// How its tree's members are found: from `cgroup` where it is exact.
    pub(super) fn find<'a>(&'a self, cgroup: Option<&'a ProcCgroup>) -> tree::Find<'a> {
        tree::Find::Own {
            cgroup,
            tracked: &*self.table,
        }
    }

    pub(super) fn kill_now(&mut self) {
        let n = kill(&self.table, self.p);
        tracing::debug!(id = self.p.id, killed = n, "grace period over: SIGKILL");
    }

    /// Once the output is in: whatever is still in the cgroup is killed and waited for (the
    /// `populated 0` event), and the last CPU and peak memory kept, before the cgroup goes.
    pub(super) async fn empty_cgroup(&mut self) {
        let Some(cg) = self.p.lock().cgroup.clone() else {
            return;
        };
        // Empty at the exit stays empty (nothing is left to fork into it): the usage read
        // then is the last.
        if self.cgroup_empty {
            return;
        }
        if cg.populated() {
            let n = cg.kill().unwrap_or(0);
            tracing::debug!(id = self.p.id, killed = n, "cgroup.kill of what was left");
            if !cg.emptied(EMPTY_WITHIN).await {
                tracing::warn!(id = self.p.id, "its cgroup did not empty after cgroup.kill");
            }
        }
        let last = cg.final_usage();
        self.p.lock().set_final_usage(last);
    }

    /// All output is in: the record lets go of its handles, and what its launch left (a
    /// cgroup, a script file) is removed.
    pub(super) fn finish(&mut self) {
        // Each hands what may block (a cgroup's rmdir waits for RCU grace periods) to the
        // blocking pool; a cgroup that goes back to the pool needs no thread of its own.
        self.cleanup.drain(..).for_each(|undo| undo());
        self.p.unsupervised();
        {
            let mut rec = self.p.lock();
            rec.set_drained();
            rec.control = None;
            // Its cgroup may serve another process from now on: nothing may signal or read it
            // as this one's.
            rec.keep_budget();
            rec.cgroup = None;
            if let Some(tty) = rec.tty.as_mut() {
                tty.master = None;
            }
        }
        self.p.notify();
        self.table.changed();
    }
}

/// What is left to do when supervision of `p` failed: kill its tree, end the record, let go of
/// its handles.
pub(super) fn abandoned(table: &Table, p: &Writer, what: &str) {
    kill(table, p);
    p.unsupervised();
    let why = format!("its supervisor failed ({what}); the process tree was killed");
    table.finish(p, Outcome::lost(why));
    {
        let mut rec = p.lock();
        rec.set_drained();
        rec.control = None;
        if let Some(tty) = rec.tty.as_mut() {
            tty.master = None;
        }
    }
    p.notify();
    table.changed();
}

/// Whether cgroup `cg` has emptied (its `populated 0` event), waited for at most
/// [`EMPTY_WITHIN`]; without a cgroup, never.
pub(super) async fn emptied(cg: Option<Arc<ProcCgroup>>) -> bool {
    match cg {
        Some(cg) => cg.emptied(EMPTY_WITHIN).await,
        None => std::future::pending().await,
    }
}

/// SIGKILLs `p`'s whole tree: its cgroup at once where it has one, else the tree walk. How many
/// processes were killed.
fn kill(table: &Table, p: &Proc) -> usize {
    let (root, cgroup) = {
        let rec = p.lock();
        (rec.root.clone(), rec.cgroup.clone())
    };
    if let Some(n) = cgroup.and_then(|cg| cg.kill()) {
        return n;
    }
    let find = tree::Find::Own {
        cgroup: None,
        tracked: table,
    };
    root.map_or(0, |root| tree::kill_tree(&root, &find))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use cuba_protocol::{Owner, ProcKind, ProcState};

    use super::*;
    use crate::state::table::{NewRecord, Reserved};

    #[test]
    fn a_failed_supervision_still_ends_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let table = crate::state::table::tests::table(dir.path(), 2);
        let new = NewRecord {
            owner: Owner {
                kind: cuba_protocol::ClientKind::Other,
                name: "t".into(),
                pid: 1,
            },
            name: None,
            command: "sleep 9".into(),
            cwd: "/".into(),
            timeout_ms: None,
            kind: ProcKind::Command,
            tty: None,
            session: None,
            token: None,
            tenant: None,
            port: None,
        };
        let Ok(Reserved::New(p)) = table.reserve(new, false) else {
            panic!("no record");
        };
        abandoned(&table, &p, "boom");
        let info = p.info();
        assert_eq!(info.state, ProcState::Lost);
        assert!(info.error.unwrap().contains("supervisor failed (boom)"));
        assert!(p.done(), "waiters are released");
        assert_eq!(table.count_running(), 0, "its place is free again");
    }
}
