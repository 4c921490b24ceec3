//! One process's cgroups (Linux): made before the spawn, entered by the child itself before its
//! exec, killed whole with `cgroup.kill`, watched until empty through inotify on
//! `cgroup.events` (`cgroup_watch.rs`), read for CPU, memory and OOM kills, and given back
//! (`cgroup_pool.rs`) or removed once the process has ended.
//!
//! The child is born in its v2 cgroup (`clone3` with `CLONE_INTO_CGROUP`, see `spawn`): no
//! migration, so no cost. The v1 hierarchies used for limits have no such start: there the
//! child's hook `write(2)`s "0" to `tasks` descriptors the daemon opened (a write of 0 moves
//! the writer, the child's one thread: no RCU grace period, see `open_tasks`), so the shell never
//! runs an instruction of its own outside its cgroups.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::cgroup_files::{
    cpu_usage_us, field, open_dir, open_tasks, pids, populated, pread_small, read_small,
    remove_dir, Files,
};
use super::cgroup_pool::{Pool, Slot};
use super::cgroup_watch::Watch;
use crate::platform::spawn::{CgroupEntry, Spawn};
use cuba_protocol::bytes_text;

/// The cgroup v1 file names used for limits where v2 lacks a controller.
pub struct V1;

impl V1 {
    pub const PIDS_MAX: &'static str = "pids.max";
    pub const MEMORY_MAX: &'static str = "memory.limit_in_bytes";
}

pub use crate::platform::posix::CgroupUsage as Usage;

/// A process's cgroups: a pooled `<base>/<leaf>` in the v2 tree, `<base>/<id>` in each v1
/// hierarchy used.
#[derive(Debug)]
pub struct ProcCgroup {
    pub(super) v2: Option<PathBuf>,
    /// The v2 cgroup's name and the CPU time it had counted before (`cgroup_pool.rs`).
    pub(super) slot: Option<Slot>,
    /// The v2 memory controller is on: memory figures and OOM kills come from v2.
    pub(super) v2_memory: bool,
    pub(super) v1_pids: Option<PathBuf>,
    pub(super) v1_memory: Option<PathBuf>,
    /// v1 cgroups it enters that are not its own (its agent's, for the CPU budget): neither
    /// made nor removed with it.
    pub(super) v1_shared: Vec<PathBuf>,
    pub(super) memory_max: Option<u64>,
    /// The pids cap and the cgroup that holds it (v2, or the v1 `pids` one).
    pub(super) pids_max: Option<(u64, PathBuf)>,
    /// Where the v2 cgroup goes back once the process has ended.
    pub(super) pool: Option<Arc<Pool>>,
    /// `cgroup.kill` was written: the kernel (6.18) SIGKILLs every child later born in that
    /// cgroup with `CLONE_INTO_CGROUP` (its kill count no longer matches the parent's), so it
    /// serves no other process.
    pub(super) killed: AtomicBool,
    /// The v2 cgroup's directory, `cgroup.events` and `cpu.stat`, open (`None`: read by name).
    pub(super) files: Option<Arc<Files>>,
    /// It went back to the pool at the process's end ([`ProcCgroup::give_back`]).
    pub(super) given_back: AtomicBool,
    /// The agent whose budget holds it.
    pub(super) group: Option<Arc<super::cgroup_budget::AgentGroup>>,
}

/// The cgroups made for a spawn, open (v2: the directory, kept with its files by the process's
/// cgroup; v1: `tasks`) until the spawn has returned.
pub struct Placement {
    /// The v2 cgroup's directory, where its files could not be opened.
    v2: Option<OwnedFd>,
    /// The v1 cgroups' `tasks`.
    procs: Vec<OwnedFd>,
    cgroup: Arc<ProcCgroup>,
}

impl Placement {
    /// Makes the directories (the v2 one unless `v2_made`: free in the pool, or made ahead),
    /// writes the `limits` (directory, file, value; into the v2 one unless `v2_configured`: by
    /// an earlier process) and opens them close-on-exec (the v2 one's directory and files
    /// unless it comes with `files`). On an error nothing is left behind.
    pub(super) fn make(
        mut cgroup: ProcCgroup,
        limits: &[(Option<PathBuf>, &str, u64)],
        (v2_made, v2_configured): (bool, bool),
        files: Option<Arc<Files>>,
    ) -> io::Result<Placement> {
        let mut files = files;
        let made = (|| {
            let (mut v2, mut procs) = (None, Vec::new());
            for dir in cgroup.dirs() {
                let is_v2 = cgroup.v2.as_deref() == Some(dir);
                if !(is_v2 && v2_made) {
                    match fs::create_dir(dir) {
                        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err((dir, e)),
                        _ => {}
                    }
                }
                for (at, file, value) in limits {
                    if at.as_deref() == Some(dir) && !(is_v2 && v2_configured) {
                        fs::write(dir.join(file), value.to_string()).map_err(|e| (dir, e))?;
                    }
                }
                // The v2 child is born in its directory; a v1 one writes to `tasks`.
                if is_v2 {
                    if files.is_none() {
                        files = Files::open(dir).ok().map(Arc::new);
                    }
                    // Without its files (read by name later, with the same result), the
                    // directory alone.
                    if files.is_none() {
                        v2 = Some(open_dir(dir).map_err(|e| (dir, e))?);
                    }
                } else {
                    procs.push(open_tasks(dir).map_err(|e| (dir, e))?);
                }
            }
            for dir in &cgroup.v1_shared {
                procs.push(open_tasks(dir).map_err(|e| (dir.as_path(), e))?);
            }
            Ok((v2, procs))
        })();
        match made {
            Ok((v2, procs)) => {
                cgroup.files = files;
                Ok(Placement {
                    v2,
                    procs,
                    cgroup: Arc::new(cgroup),
                })
            }
            Err((dir, e)) => {
                // The words say where; the kind stays the OS's (a permission, a full disk).
                let e = io::Error::new(
                    e.kind(),
                    format!("cannot make cgroup {}: {e}", dir.display()),
                );
                cgroup.remove();
                Err(e)
            }
        }
    }

    /// The child is born in the v2 cgroup and enters the v1 ones before it execs.
    pub fn install(&self, cmd: &mut Spawn) {
        if let Some(dir) = self.v2_dir() {
            cmd.cgroup(CgroupEntry { dir });
        }
        if self.procs.is_empty() {
            return;
        }
        let fds: Vec<RawFd> = self.procs.iter().map(AsRawFd::as_raw_fd).collect();
        for &fd in &fds {
            cmd.uses(fd);
        }
        // The hook only reads a list built here and calls write(2), async-signal-safe; the
        // descriptors stay open until the spawn has returned (the layer holds this `Placement`).
        cmd.hook(Box::new(move || {
            for &fd in &fds {
                // SAFETY: write(2) of one byte from a static buffer.
                if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        }));
    }

    pub fn handle(&self) -> Arc<ProcCgroup> {
        self.cgroup.clone()
    }

    /// Whether a process can be born in the v2 cgroup (a trial child).
    pub fn can_start_inside(&self) -> bool {
        self.v2_dir().is_some_and(super::clone::can_start_in)
    }

    /// The v2 cgroup's directory, open.
    fn v2_dir(&self) -> Option<RawFd> {
        let kept = self.cgroup.files.as_ref().map(|f| f.dir());
        kept.or_else(|| self.v2.as_ref().map(AsRawFd::as_raw_fd))
    }
}

impl ProcCgroup {
    /// The agent whose budget holds its tree.
    pub fn agent(&self) -> Option<&Arc<super::cgroup_budget::AgentGroup>> {
        self.group.as_ref()
    }

    fn dirs(&self) -> impl Iterator<Item = &Path> {
        [&self.v2, &self.v1_pids, &self.v1_memory]
            .into_iter()
            .filter_map(|d| d.as_deref())
    }

    /// Whether the tree can be killed and watched exactly (a v2 cgroup).
    pub fn exact(&self) -> bool {
        self.v2.is_some()
    }

    /// SIGKILLs everything in the cgroup at once (`cgroup.kill`), forks in flight included.
    /// Returns how many processes it held, or `None` without a v2 cgroup.
    pub fn kill(&self) -> Option<usize> {
        let dir = self.v2.as_ref()?;
        // Nothing to kill (a process reaped before the kernel unlinked it from its cgroup left
        // `populated 1` for a moment): no write, so the cgroup can serve again.
        if !self.populated_at(dir) {
            return Some(0);
        }
        let n = self.members().map_or(0, |m| m.len());
        // Before the write: a write that fails half-way may still have counted.
        self.killed.store(true, Ordering::Relaxed);
        match fs::write(dir.join("cgroup.kill"), "1") {
            Ok(()) => Some(n),
            Err(e) => {
                tracing::warn!("cannot kill cgroup {}: {e}", dir.display());
                None
            }
        }
    }

    /// The processes in the v2 cgroup now: exactly the tree's members, at the cost of the
    /// tree, not of the machine. `None` without one, or when it cannot be read.
    pub fn members(&self) -> Option<Vec<i32>> {
        let dir = self.v2.as_deref()?;
        let text = match &self.files {
            Some(f) => f
                .open_at(c"cgroup.procs")
                .ok()
                .and_then(|file| pread_small(&file)),
            None => read_small(&dir.join("cgroup.procs")),
        }?;
        Some(pids(&text))
    }

    /// Whether any process is left (`populated 1` in `cgroup.events`).
    pub fn populated(&self) -> bool {
        self.v2.as_deref().is_some_and(|dir| self.populated_at(dir))
    }

    /// [`ProcCgroup::populated`] of the v2 cgroup `dir`: through its open file where there is
    /// one.
    fn populated_at(&self, dir: &Path) -> bool {
        match self.files.as_ref().and_then(|f| f.populated()) {
            Some(p) => p,
            None => populated(dir),
        }
    }

    /// Waits (as an event: inotify on `cgroup.events`) until the cgroup is empty, at most
    /// `limit`. Whether it is.
    pub async fn emptied(&self, limit: Duration) -> bool {
        let Some(dir) = self.v2.as_deref() else {
            return true;
        };
        // Most trees are gone by the time their shell's exit is seen: no watch needed.
        if !self.populated_at(dir) {
            return true;
        }
        let watch = match Watch::new(&dir.join("cgroup.events")) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("cannot watch {}: {e}", dir.display());
                return !self.populated_at(dir);
            }
        };
        if let Ok(Err(e)) =
            tokio::time::timeout(limit, watch.until_empty(|| self.populated_at(dir))).await
        {
            tracing::warn!("cannot watch {}: {e}", dir.display());
        }
        !self.populated_at(dir)
    }

    /// CPU time and memory, now.
    pub fn usage(&self) -> Usage {
        self.read_usage(true)
    }

    /// CPU time and peak memory once the tree has ended: the resident memory of what is left
    /// (the measure where there is no memory controller) says nothing about the process then,
    /// and reading it costs a file per process on the way to the exit's reply.
    pub fn final_usage(&self) -> Usage {
        self.read_usage(false)
    }

    fn read_usage(&self, resident: bool) -> Usage {
        let base = self.slot.map_or(0, |s| s.cpu_base_us);
        let cpu_ms = self
            .files
            .as_ref()
            .and_then(|f| f.cpu_usage_us())
            .or_else(|| self.v2.as_deref().and_then(cpu_usage_us))
            .map(|us| us.saturating_sub(base) / 1000);
        let num = |dir: Option<&PathBuf>, f: &str| {
            dir.and_then(|d| read_small(&d.join(f)))
                .and_then(|t| t.trim().parse().ok())
        };
        let (memory_bytes, memory_peak_bytes) = if self.v2_memory {
            let dir = self.v2.as_ref();
            (num(dir, "memory.current"), num(dir, "memory.peak"))
        } else if self.v1_memory.is_none() {
            // No memory controller: the resident memory of the processes in the cgroup.
            let rss = self
                .members()
                .filter(|_| resident)
                .and_then(|pids| rss_sum(&pids));
            (rss, None)
        } else {
            let dir = self.v1_memory.as_ref();
            (
                num(dir, "memory.usage_in_bytes"),
                num(dir, "memory.max_usage_in_bytes"),
            )
        };
        let (pids_max, forks_refused) = match &self.pids_max {
            Some((max, dir)) => (
                Some(*max),
                read_small(&dir.join("pids.events")).and_then(|t| field(&t, "max")),
            ),
            None => (None, None),
        };
        Usage {
            cpu_ms,
            memory_bytes,
            memory_peak_bytes,
            pids_max,
            forks_refused,
        }
    }

    /// Why the kernel ended the process, if it did: an OOM kill in its cgroup
    /// (`memory.events` in v2, `memory.oom_control` in v1).
    pub fn oom_reason(&self) -> Option<String> {
        let kills = if self.v2_memory {
            let dir = self.v2.as_ref()?;
            field(&read_small(&dir.join("memory.events"))?, "oom_kill")
        } else {
            let dir = self.v1_memory.as_ref()?;
            field(
                &fs::read_to_string(dir.join("memory.oom_control")).ok()?,
                "oom_kill",
            )
        }?;
        let max = (self.memory_max).map(|m| format!("memory_max {}", bytes_text(m)));
        let why: Vec<String> = max
            .into_iter()
            .chain(self.group.as_ref().and_then(|g| g.memory_reason()))
            .collect();
        (kills > 0).then(|| match why.is_empty() {
            true => "killed by the kernel: out of memory".to_string(),
            false => format!(
                "killed by the kernel: out of memory ({})",
                why.join(", or ")
            ),
        })
    }

    /// At its end: forks its tree was refused at its agent's pids budget, in a sentence
    /// (recorded as the agent's last hit).
    pub fn budget_reached(&self) -> Option<String> {
        self.group
            .as_ref()?
            .forks_refused_in(self.v1_pids.as_deref())
    }

    /// Which pooled v2 cgroup it is in (for an in-place upgrade).
    pub fn slot(&self) -> Option<Slot> {
        self.slot
    }

    /// Once the process has ended and its output is in, on the runtime's thread: its v2 cgroup
    /// goes back to the pool if that needs no removal (it is reusable, empty and there is
    /// room; no v1 cgroups to remove). Whether it did: if not, [`ProcCgroup::release`] is to
    /// run, off the runtime.
    pub fn give_back(&self) -> bool {
        let (Some(pool), Some(slot)) = (&self.pool, self.slot) else {
            return false;
        };
        let v1 = self.v1_pids.is_some() || self.v1_memory.is_some();
        if v1 || self.killed.load(Ordering::Relaxed) || !pool.keep(slot.leaf, self.files.as_ref()) {
            return false;
        }
        self.given_back.store(true, Ordering::Relaxed);
        true
    }

    /// Once the process has ended and its output is in: its v2 cgroup goes back to the pool
    /// (kept if empty and never killed, or removed and a spare made ahead), the v1 ones go.
    /// Blocking: run off the runtime.
    pub fn release(&self) {
        if self.given_back.load(Ordering::Relaxed) {
            return;
        }
        let (Some(pool), Some(slot)) = (&self.pool, self.slot) else {
            return self.remove();
        };
        pool.release(
            slot.leaf,
            !self.killed.load(Ordering::Relaxed),
            self.files.as_ref(),
        );
        for dir in [&self.v1_pids, &self.v1_memory].into_iter().flatten() {
            remove_dir(dir);
        }
    }

    /// Removes the cgroups (an empty one only: the kernel refuses a populated one).
    pub fn remove(&self) {
        self.dirs().for_each(remove_dir);
    }
}

/// A leftover cgroup `dir` is killed and waited for (bounded; at start-up, blocking). Whether
/// it was empty already.
pub(super) fn empty_now(dir: &Path) -> bool {
    if !populated(dir) {
        return true;
    }
    let _ = fs::write(dir.join("cgroup.kill"), "1");
    if let Ok(w) = Watch::new(&dir.join("cgroup.events")) {
        for _ in 0..20 {
            if !populated(dir) {
                break;
            }
            w.block(100);
        }
    }
    false
}

/// The summed resident memory of the processes `pids` (`None`: none is left).
fn rss_sum(pids: &[i32]) -> Option<u64> {
    let sum = pids
        .iter()
        .filter_map(|p| crate::platform::proc::rss_bytes(*p))
        .sum::<u64>();
    (sum > 0).then_some(sum)
}
