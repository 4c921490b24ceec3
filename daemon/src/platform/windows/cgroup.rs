//! What a cgroup is on Linux, on Windows: a Job Object per command (`job.rs`). The command is
//! started suspended, put in its job and resumed, so its whole tree is in it: the job stops it
//! exactly (`TerminateJobObject`), counts its CPU time and peak memory, and carries `pids_max`
//! (active processes) and `memory_max` (committed memory of the whole tree). The job is killed
//! with its last handle, so a tree never outlives the daemon. There is no pool and nothing to
//! hand over: the types and names are the Unix ones so callers need no `cfg`.

use std::collections::HashSet;
use std::sync::Arc;

pub use crate::platform::usage::{BudgetSample, NoAgentGroup as AgentGroup};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::job::{self, Job};
use crate::base::config::{CgroupMode, Limits};

pub use crate::platform::usage::CgroupSlot;
pub use crate::platform::usage::CgroupUsage as Usage;

/// The Job Objects of this daemon: the limits each new one gets.
#[derive(Debug)]
pub struct Cgroups {
    limits: job::Limits,
    mode: String,
}

impl Cgroups {
    /// The limits every command's job gets: `pids_max` and `memory_max`. Never fails: Job
    /// Objects exist on every Windows the daemon runs on (the cgroup mode and the hand-over's
    /// `keep` have no meaning here).
    pub fn setup(
        _mode: &CgroupMode,
        limits: &Limits,
        _instance: &str,
        _keep: (&HashSet<u64>, &HashSet<u64>),
    ) -> Result<Cgroups> {
        if limits.budgets {
            anyhow::bail!(
                "budgets per agent (agent_cpu, agent_memory, agent_pids, [agents.NAME] cpu / \
                 memory / pids) need Linux cgroups; unset them"
            );
        }
        Ok(Cgroups {
            limits: job::Limits {
                processes: limits
                    .pids_max
                    .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                memory: limits.memory_max,
            },
            mode: "a Job Object per command: exact stop, CPU time and peak memory, pids_max / \
                   memory_max"
                .into(),
        })
    }

    /// Which mode is active, one line (`DaemonStatus.supervision`).
    pub fn mode(&self) -> &str {
        &self.mode
    }

    /// Always: every command gets a job.
    pub fn is_active(&self) -> bool {
        true
    }

    /// Nothing to remove: each job goes with its last handle.
    pub fn remove(&self) {}

    /// Never: no process is handed over from a previous program on Windows.
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
            "budgets per agent need Linux cgroups, which Windows does not have",
        ))
    }

    pub fn groups(&self) -> Vec<Arc<AgentGroup>> {
        Vec::new()
    }

    /// A fresh job with the daemon's limits, for one command's tree.
    pub fn job(&self) -> std::io::Result<Arc<ProcCgroup>> {
        Ok(Arc::new(ProcCgroup {
            job: Job::new(self.limits)?,
            pids_max: self.limits.processes.map(u64::from),
        }))
    }
}

/// One command's job. Dropping the last handle to it ends whatever still runs in it.
#[derive(Debug)]
pub struct ProcCgroup {
    job: Job,
    pids_max: Option<u64>,
}

impl ProcCgroup {
    /// Never held by a budget here.
    pub fn agent(&self) -> Option<&Arc<AgentGroup>> {
        None
    }

    pub fn budget_reached(&self) -> Option<String> {
        None
    }

    /// The job, to start the command in.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// Always: the job holds the whole tree, and nothing else.
    pub fn exact(&self) -> bool {
        true
    }

    /// Ends every process of the tree (exit code 1): how many were active, or `None` if the
    /// job could not be terminated.
    pub fn kill(&self) -> Option<usize> {
        let active = self.job.active().unwrap_or(0);
        match self.job.kill(1) {
            Ok(()) => Some(active as usize),
            Err(e) => {
                tracing::debug!(error = %e, "TerminateJobObject failed");
                None
            }
        }
    }

    /// The pids in the tree now.
    pub fn members(&self) -> Option<Vec<i32>> {
        let pids = self.job.pids().ok()?;
        Some(
            pids.into_iter()
                .filter_map(|p| i32::try_from(p).ok())
                .collect(),
        )
    }

    /// Whether a process of the tree is still running (one that cannot be asked: no).
    pub fn populated(&self) -> bool {
        self.job.active().is_ok_and(|n| n > 0)
    }

    /// Waits up to `limit` for the tree to be empty: whether it is.
    pub async fn emptied(&self, limit: Duration) -> bool {
        let start = Instant::now();
        loop {
            if !self.populated() {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The tree's CPU time and peak memory (committed), and its pids cap.
    pub fn usage(&self) -> Usage {
        let mut usage = Usage {
            pids_max: self.pids_max,
            ..Usage::default()
        };
        if let Ok(u) = self.job.usage() {
            usage.cpu_ms = Some(u.cpu_ns / 1_000_000);
            usage.memory_peak_bytes = (u.peak_memory > 0).then_some(u.peak_memory);
        }
        usage
    }

    /// The tree's CPU time in ns, to the job's own precision (the look for a wait for input
    /// compares two); `None` when the job cannot be asked.
    pub fn cpu_ns(&self) -> Option<u64> {
        self.job.usage().ok().map(|u| u.cpu_ns)
    }

    /// The same as [`ProcCgroup::usage`]: a job's accounting stays readable after its end.
    pub fn final_usage(&self) -> Usage {
        self.usage()
    }

    /// Never known: a job at its memory cap fails allocations, it kills nothing.
    pub fn oom_reason(&self) -> Option<String> {
        None
    }

    /// Nothing to remove: the job goes with its last handle.
    pub fn remove(&self) {}

    /// Always done: there is no pool to give a job back to.
    pub fn give_back(&self) -> bool {
        true
    }

    /// Nothing to release: the job goes with its last handle.
    pub fn release(&self) {}

    /// Never: there are no pooled cgroups on Windows.
    pub fn slot(&self) -> Option<CgroupSlot> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cgroups(limits: &Limits) -> Cgroups {
        let none = HashSet::new();
        Cgroups::setup(&CgroupMode::Auto, limits, "test", (&none, &none)).expect("setup")
    }

    #[test]
    fn an_empty_job_reports_its_cap_and_no_members() {
        let limits = Limits {
            pids_max: Some(7),
            ..Limits::default()
        };
        let c = cgroups(&limits);
        assert!(c.is_active() && c.mode().contains("Job Object"));
        let job = c.job().expect("job");
        assert!(job.exact() && !job.populated());
        assert_eq!(job.members(), Some(Vec::new()));
        assert_eq!(job.usage().pids_max, Some(7));
        assert_eq!(job.kill(), Some(0));
    }

    #[test]
    fn a_killed_tree_is_emptied() {
        let c = cgroups(&Limits::default());
        let cg = c.job().expect("job");
        let mut cmd = std::process::Command::new("cmd.exe");
        cmd.args(["/d", "/c", "ping -n 30 127.0.0.1 >NUL"])
            .stdout(std::process::Stdio::null());
        let mut child = cg.job().spawn(&mut cmd, 0).expect("spawn");
        let pid = child.id() as i32;
        assert!(cg.populated());
        assert!(cg.members().is_some_and(|m| m.contains(&pid)));
        assert!(cg.kill().is_some_and(|n| n >= 1));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        assert!(rt.block_on(cg.emptied(Duration::from_secs(5))));
        let _ = child.wait();
        assert!(cg.final_usage().cpu_ms.is_some());
    }
}
