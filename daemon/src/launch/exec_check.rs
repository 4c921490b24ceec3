//! The exec-check layer (Linux): the child installs the filter as its last hook, and its
//! listener goes to the checker thread with what decides the tree's execs, before the spawn
//! (the child's own first exec waits for that thread's answer).

use std::os::fd::OwnedFd;
use std::sync::{Arc, Weak};

use cuba_protocol::ExecBlocked;

use super::layer::Layer;
use crate::exec_rules::{Exec, ExecRules, Refusal};
use crate::platform::exec_check::{self, Checker, ChildEnd, Judge, Pending, Source, Watch};
use crate::platform::spawn::Spawn;
use crate::policy::Effective;
use crate::record::Proc;
use crate::table::Table;

/// Refusals a record keeps (the audit log has every one): the first, and then those killed
/// after their exec in place of refusals at the exec.
const KEPT: usize = 8;

/// The checker and how its filters are installed.
pub struct ExecService {
    checker: Checker,
    no_new_privs: bool,
}

impl ExecService {
    pub fn start() -> std::io::Result<ExecService> {
        Ok(ExecService {
            checker: Checker::start()?,
            no_new_privs: !exec_check::privileged(),
        })
    }

    /// Takes over the listener of a process handed over by an upgrade.
    pub fn adopt(&self, table: &Arc<Table>, p: &Arc<Proc>, listener: OwnedFd) {
        let policy = p.lock().policy.clone();
        let Some(policy) = policy else { return };
        let judge = ProcJudge::judge(table, p, &policy, self.no_new_privs);
        let w = Watch {
            source: Source::Listener(listener),
            judge,
        };
        if let Err(e) = self.checker.watch(w) {
            tracing::error!(id = p.id, "exec checks: {e}");
        }
    }
}

struct ProcJudge {
    rules: ExecRules,
    table: Arc<Table>,
    proc: Weak<Proc>,
}

impl ProcJudge {
    fn judge(table: &Arc<Table>, p: &Arc<Proc>, policy: &Effective, nnp: bool) -> Arc<dyn Judge> {
        Arc::new(ProcJudge {
            rules: ExecRules::new(policy, nnp),
            table: table.clone(),
            proc: Arc::downgrade(p),
        })
    }
}

impl Judge for ProcJudge {
    fn decide(&self, exec: &Exec) -> Option<Refusal> {
        self.rules.decide(exec)
    }

    fn refused(&self, blocked: ExecBlocked) {
        let Some(p) = self.proc.upgrade() else { return };
        tracing::info!(id = p.id, program = %blocked.program, rule = %blocked.rule, "exec refused");
        let info = {
            let mut rec = p.lock();
            // A shell trying each `PATH` entry meets the same program again (`/bin` → `/usr/bin`).
            let again = rec.info.blocked.last().is_some_and(|b| {
                (b.pid, &b.program, &b.argv) == (blocked.pid, &blocked.program, &blocked.argv)
            });
            if again {
                return;
            }
            let kept = &mut rec.info.blocked;
            if kept.len() < KEPT {
                kept.push(blocked.clone());
            } else if blocked.killed {
                // A program that ran and was killed says more than one refused at its exec:
                // it takes the place of the oldest of those.
                if let Some(i) = kept.iter().position(|b| !b.killed) {
                    kept.remove(i);
                    kept.push(blocked.clone());
                }
            }
            rec.info.clone()
        };
        self.table.audit().exec_refused(&info, &blocked);
        self.table.changed();
    }

    fn listening(&self, listener: Arc<OwnedFd>) {
        if let Some(p) = self.proc.upgrade() {
            p.lock().exec_listener = Some(listener);
        }
    }
}

pub struct ExecLayer {
    service: Arc<ExecService>,
    judge: Option<Arc<dyn Judge>>,
    /// Held until the spawn returned: the child has its copy then.
    child: Option<ChildEnd>,
}

impl ExecLayer {
    pub fn new(
        service: &Arc<ExecService>,
        table: &Arc<Table>,
        p: &Arc<Proc>,
        policy: &Effective,
    ) -> ExecLayer {
        ExecLayer {
            judge: Some(ProcJudge::judge(table, p, policy, service.no_new_privs)),
            service: service.clone(),
            child: None,
        }
    }
}

impl Layer for ExecLayer {
    fn before(&mut self, cmd: &mut Spawn) -> Result<(), String> {
        let mut pending =
            Pending::new().map_err(|e| format!("cannot set up the exec checks: {e}"))?;
        pending.install(cmd, self.service.no_new_privs);
        let (source, child) = pending.split();
        self.child = Some(child);
        let judge = self
            .judge
            .take()
            .ok_or("the exec checks were set up twice")?;
        self.service.checker.watch(Watch { source, judge })
    }

    fn after(&mut self, _pid: i32) -> Result<(), String> {
        self.child = None;
        Ok(())
    }
}
