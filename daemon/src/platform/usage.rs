//! Plain types every OS shares: what a command tree used (a Linux cgroup's or a Windows Job
//! Object's accounting), which pooled cgroup a process is in, and how a process ended.

/// CPU and memory of a process's cgroup (or, on Windows, its Job Object: the whole tree, all it
/// ever ran); where there is neither (macOS), never known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupUsage {
    pub cpu_ms: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub memory_peak_bytes: Option<u64>,
    /// The cgroup's (or job's) pids cap, where the daemon set one.
    pub pids_max: Option<u64>,
    /// Forks and clones the kernel refused at that cap (`pids.events` `max`).
    pub forks_refused: Option<u64>,
}

/// The counters of an agent's cgroups now (Linux's `AgentGroup::sample`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetSample {
    /// CPU time of all its trees, microseconds.
    pub cpu_us: Option<u64>,
    /// Times the CPU budget held it back, and for how long in all (microseconds).
    pub throttled: Option<(u64, u64)>,
    pub memory: Option<u64>,
    /// Times its memory reached the budget (reclaim), and OOM kills.
    pub memory_hits: Option<(u64, u64)>,
    pub pids: Option<u64>,
    /// Forks refused at the budget.
    pub pids_hits: Option<u64>,
}

/// An agent's cgroups where there are none (macOS, Windows): never made.
#[derive(Debug)]
pub enum NoAgentGroup {}

#[cfg(not(target_os = "linux"))]
impl NoAgentGroup {
    pub fn name(&self) -> &str {
        match *self {}
    }

    pub fn budget(&self) -> cuba_protocol::Budget {
        match *self {}
    }

    pub fn sample(&self) -> BudgetSample {
        match *self {}
    }

    pub fn last_hit(&self) -> Option<cuba_protocol::BudgetHit> {
        match *self {}
    }

    pub fn idle(&self) -> bool {
        match *self {}
    }

    pub fn set_hit(&self, _: cuba_protocol::BudgetHit) {
        match *self {}
    }
}

/// Which pooled cgroup a process is in, and the CPU time that cgroup had counted before it: what
/// an in-place upgrade hands the new program so it finds the cgroup and reads the same figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupSlot {
    /// The directory's name under the daemon's cgroup base.
    pub leaf: u64,
    /// `usage_usec` of its `cpu.stat` when the process was given it.
    pub cpu_base_us: u64,
}

/// How a tracked process ended: its exit code, or (POSIX only) the signal that ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}
