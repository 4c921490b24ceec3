//! macOS has no cgroups: supervision is process groups and the tree walk, and `pids_max` /
//! `memory_max` stop the daemon at start-up. The types exist so callers need no `cfg`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::base::config::{CgroupMode, Limits};

/// Never active here.
#[derive(Debug)]
pub struct Cgroups {
    mode: String,
}

/// Never known here.
pub use crate::platform::posix::CgroupSlot;
pub use crate::platform::posix::CgroupUsage as Usage;
pub use crate::platform::usage::{BudgetSample, NoAgentGroup as AgentGroup};

/// Never made here.
#[derive(Debug)]
pub struct ProcCgroup;

/// Never made here.
pub struct Placement;

impl Cgroups {
    pub fn setup(
        _mode: &CgroupMode,
        limits: &Limits,
        _instance: &str,
        _keep: (
            &std::collections::HashSet<u64>,
            &std::collections::HashSet<u64>,
        ),
    ) -> Result<Cgroups> {
        if limits.wants_cgroup() {
            bail!(
                "pids_max / memory_max (CUBA_EXEC_PIDS_MAX, CUBA_EXEC_MEMORY_MAX) and budgets \
                 per agent (agent_cpu, agent_memory, agent_pids, [agents.NAME] cpu / memory / \
                 pids) need Linux cgroups, which macOS does not have; unset them"
            );
        }
        Ok(Cgroups {
            mode: "process groups + process tree walk: cgroups are unavailable on macOS".into(),
        })
    }

    pub fn mode(&self) -> &str {
        &self.mode
    }

    pub fn is_active(&self) -> bool {
        false
    }

    pub fn remove(&self) {}

    pub fn existing(
        &self,
        _id: u64,
        _slot: Option<CgroupSlot>,
        _group: Option<Arc<AgentGroup>>,
    ) -> Option<Arc<ProcCgroup>> {
        None
    }

    /// Budgets per agent need Linux cgroups.
    pub fn group(
        &self,
        _name: &str,
        _budget: cuba_protocol::Budget,
    ) -> std::io::Result<Arc<AgentGroup>> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "budgets per agent need Linux cgroups, which macOS does not have",
        ))
    }

    pub fn groups(&self) -> Vec<Arc<AgentGroup>> {
        Vec::new()
    }

    pub fn prepare(
        &self,
        _id: u64,
        _group: Option<&Arc<AgentGroup>>,
    ) -> std::io::Result<Placement> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "cgroups are unavailable on macOS",
        ))
    }
}

impl Placement {
    pub fn install(&self, _cmd: &mut crate::platform::spawn::Spawn) {}

    pub fn handle(&self) -> Arc<ProcCgroup> {
        Arc::new(ProcCgroup)
    }
}

impl ProcCgroup {
    /// Never held by a budget here.
    pub fn agent(&self) -> Option<&Arc<AgentGroup>> {
        None
    }

    pub fn budget_reached(&self) -> Option<String> {
        None
    }

    pub fn exact(&self) -> bool {
        false
    }

    pub fn kill(&self) -> Option<usize> {
        None
    }

    pub fn members(&self) -> Option<Vec<i32>> {
        None
    }

    pub fn populated(&self) -> bool {
        false
    }

    pub async fn emptied(&self, _limit: Duration) -> bool {
        true
    }

    pub fn usage(&self) -> Usage {
        Usage::default()
    }

    pub fn final_usage(&self) -> Usage {
        Usage::default()
    }

    pub fn oom_reason(&self) -> Option<String> {
        None
    }

    pub fn remove(&self) {}

    pub fn give_back(&self) -> bool {
        true
    }

    pub fn release(&self) {}

    pub fn slot(&self) -> Option<CgroupSlot> {
        None
    }
}
