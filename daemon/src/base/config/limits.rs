//! Resource limit settings for every command (`[limits]`, `CUBA_EXEC_RLIMIT_*`,
//! `CUBA_EXEC_PIDS_MAX`, `CUBA_EXEC_MEMORY_MAX`). How they are applied is the platform's
//! (`platform::limits`).

/// A per-process resource limit, whatever the OS calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rlimit {
    /// CPU seconds.
    Cpu,
    /// Largest file it may write, bytes.
    FileSize,
    /// Open descriptors.
    OpenFiles,
    /// Virtual memory, bytes.
    AddressSpace,
}

/// Whether processes get a cgroup of their own (`CUBA_EXEC_CGROUPS`, `cgroups`;
/// `CUBA_EXEC_CGROUP_PARENT`, `cgroup_parent`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CgroupMode {
    /// Under the daemon's own cgroup v2, where it is writable and a process can be born in its
    /// cgroup (clone3 `CLONE_INTO_CGROUP`) or moved there cheaply (`favordynmods`), or where
    /// `pids_max` / `memory_max` need one (the default).
    #[default]
    Auto,
    /// Under the daemon's own cgroup v2, where it is writable, whatever entering one costs.
    On,
    /// Under this cgroup v2 directory.
    Parent(std::path::PathBuf),
    /// Never: process groups and the `/proc` tree walk only.
    Off,
}

/// `None` everywhere: no limits (the default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_CPU`, seconds (`CUBA_EXEC_RLIMIT_CPU`, `[limits] cpu_seconds`).
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_FSIZE`, bytes (`CUBA_EXEC_RLIMIT_FSIZE`, `[limits] file_size`).
    pub file_size: Option<u64>,
    /// `RLIMIT_NOFILE` (`CUBA_EXEC_RLIMIT_NOFILE`, `[limits] open_files`).
    pub open_files: Option<u64>,
    /// `RLIMIT_AS`, bytes (`CUBA_EXEC_RLIMIT_AS`, `[limits] address_space`).
    pub address_space: Option<u64>,
    /// cgroup `pids.max` (`CUBA_EXEC_PIDS_MAX`, `[limits] pids_max`).
    pub pids_max: Option<u64>,
    /// cgroup `memory.max`, bytes (`CUBA_EXEC_MEMORY_MAX`, `[limits] memory_max`).
    pub memory_max: Option<u64>,
    /// Some agent has a budget (`[agents]`, `agent_*`): a cgroup per agent is needed.
    pub budgets: bool,
    /// Where the per-process cgroups go.
    pub cgroups: CgroupMode,
}

impl Limits {
    /// The configured rlimits as (limit, value, setting name).
    pub fn rlimits(&self) -> Vec<(Rlimit, u64, &'static str)> {
        [
            (Rlimit::Cpu, self.cpu_seconds, "CUBA_EXEC_RLIMIT_CPU"),
            (Rlimit::FileSize, self.file_size, "CUBA_EXEC_RLIMIT_FSIZE"),
            (
                Rlimit::OpenFiles,
                self.open_files,
                "CUBA_EXEC_RLIMIT_NOFILE",
            ),
            (
                Rlimit::AddressSpace,
                self.address_space,
                "CUBA_EXEC_RLIMIT_AS",
            ),
        ]
        .into_iter()
        .filter_map(|(r, v, n)| v.map(|v| (r, v, n)))
        .collect()
    }

    pub fn wants_cgroup(&self) -> bool {
        self.pids_max.is_some() || self.memory_max.is_some() || self.budgets
    }

    pub fn is_empty(&self) -> bool {
        self.rlimits().is_empty() && !self.wants_cgroup()
    }
}
