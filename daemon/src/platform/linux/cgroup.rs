//! Per-process cgroups (Linux): where they go, and the mode the daemon runs in.
//!
//! The cgroup v2 tree is found in `/proc/self/mountinfo` (it is not always `/sys/fs/cgroup`:
//! a hybrid machine mounts it at `/sys/fs/cgroup/unified`). Each process gets a v2 cgroup
//! `<parent>/cuba-exec-<instance>/<leaf>` from the pool (`cgroup_pool.rs`: reused once empty),
//! and `<v1 base>/<id>` in each v1 hierarchy used, where the parent is the daemon's own cgroup,
//! or the configured `cgroup_parent`. The child is born in it, or enters it before its exec
//! (`cgroup_proc.rs`).
//!
//! `pids_max` / `memory_max` need the `pids` / `memory` controllers. Where the v2 tree offers
//! them they are enabled for the per-process cgroups; v2 allows that only in a cgroup without
//! processes of its own ("no internal processes"), so when the daemon's own cgroup refuses
//! (EBUSY) the daemon moves itself to a leaf beside the base, `cubad-<instance>`. Where the v2
//! tree lacks a controller, a writable cgroup v1 hierarchy of it is used instead, entered the
//! same way. Without a writable v2 tree supervision falls back to process groups and the
//! `/proc` tree walk (`tree.rs`); limits that cannot be applied at all stop the daemon at start.
//!
//! An agent with a budget has a cgroup of its own between the base and its processes' cgroups
//! (`cgroup_budget.rs`).

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use super::cgroup_bases::{enable, remove_below, sweep_v1, v1_base, v2_base};
pub use super::cgroup_budget::{AgentGroup, Sample as BudgetSample};
use super::cgroup_budget::{Groups, Kind, Tree};
use super::cgroup_files::{mounts, read, Files};
use super::cgroup_leftovers::highest_leaf;
use super::cgroup_pool::{Pool, Slot};
use super::cgroup_proc::V1;
pub use super::cgroup_proc::{Placement, ProcCgroup, Usage};
use crate::base::config::{CgroupMode, Limits};
pub use crate::platform::posix::CgroupSlot;

/// The per-process cgroups of this daemon, or why there are none.
#[derive(Debug)]
pub struct Cgroups {
    /// `<parent>/cuba-exec-<instance>` in the v2 tree.
    v2: Option<PathBuf>,
    /// Controllers enabled for the per-process v2 cgroups.
    v2_pids: bool,
    v2_memory: bool,
    /// `<v1 mount><daemon's v1 cgroup>/cuba-exec-<instance>`, for limits v2 cannot apply.
    v1_pids: Option<PathBuf>,
    v1_memory: Option<PathBuf>,
    limits: Limits,
    mode: String,
    /// The per-process v2 cgroups, empty ones kept for the next process.
    pool: Option<Arc<Pool>>,
    /// The agents with a budget, each a cgroup above its processes'.
    groups: Groups,
    instance: String,
    /// Handed-over processes, whose v1 cgroups a budget's new v1 base keeps.
    keep: HashSet<u64>,
}

impl Cgroups {
    /// Finds the tree, makes the base (removing what a crashed daemon left in it, its live
    /// processes killed first) and checks that the configured limits can be applied. Never
    /// fails for want of a cgroup alone: that is the fallback mode. It fails when `pids_max` /
    /// `memory_max` are configured and cannot be applied.
    /// `keep`: processes an in-place upgrade handed over, whose cgroups are theirs still (v1
    /// ones named by id, v2 ones by their slot's leaf).
    pub fn setup(
        mode: &CgroupMode,
        limits: &Limits,
        instance: &str,
        keep: (&HashSet<u64>, &HashSet<u64>),
    ) -> Result<Cgroups> {
        let (keep, keep_leaves) = keep;
        let name = format!("cuba-exec-{instance}");
        let v2 = v2_base(mode, &name, instance, keep_leaves).map_err(|why| format!("{why:#}"));
        let mut c = Cgroups {
            v2: v2.as_ref().ok().cloned(),
            v2_pids: false,
            v2_memory: false,
            v1_pids: None,
            v1_memory: None,
            limits: limits.clone(),
            mode: String::new(),
            pool: None,
            groups: Groups::default(),
            instance: instance.to_string(),
            keep: keep.clone(),
        };
        let hint = "unset CUBA_EXEC_PIDS_MAX / CUBA_EXEC_MEMORY_MAX, or run cubad in a \
                    delegated cgroup (e.g. `systemd-run --user -p Delegate=yes cubad`)";
        if let Some(base) = c.v2.clone() {
            let parent = base.parent().map(Path::to_path_buf).unwrap_or_default();
            let available = read(&parent.join("cgroup.controllers")).unwrap_or_default();
            let has = |c: &str| available.split_whitespace().any(|a| a == c);
            if limits.pids_max.is_some() && has("pids") {
                c.v2_pids = enable(&parent, &base, "pids", instance).is_ok();
            }
            // The memory controller also gives `memory.current` / `peak`: worth enabling
            // whenever it is offered.
            if has("memory") {
                c.v2_memory = enable(&parent, &base, "memory", instance).is_ok();
            }
        }
        // A crashed daemon's v1 cgroups (a budget's are made only on first use) go first.
        sweep_v1(&name, keep);
        if limits.pids_max.is_some() && !c.v2_pids {
            c.v1_pids = Some(v1_base("pids", &name, keep).with_context(|| {
                format!("pids_max needs the pids controller, in cgroup v2 or v1; {hint}")
            })?);
        }
        if limits.memory_max.is_some() && !c.v2_memory {
            c.v1_memory = Some(v1_base("memory", &name, keep).with_context(|| {
                format!("memory_max needs the memory controller, in cgroup v2 or v1; {hint}")
            })?);
        }
        let mut no_v2 = v2.err();
        // Memory figures cannot be told apart in a reused cgroup (see `cgroup_pool.rs`).
        let reuse = !c.v2_memory;
        c.pool =
            c.v2.clone()
                .map(|base| Pool::new(base.clone(), reuse, highest_leaf(&base)));
        if let Err(e) = c.probe(mode) {
            if limits.wants_cgroup() {
                return Err(e);
            }
            // Without limits a cgroup is a help, not a requirement: fall back.
            no_v2 = Some(format!("{e:#}"));
            c.v2 = None;
            c.v2_memory = false;
            c.pool = None;
        }
        c.mode = c.describe(no_v2);
        if limits.budgets && !c.is_active() {
            bail!(
                "budgets per agent need cgroups, and this daemon runs without: {}; unset the \
                 budgets (agent_cpu, agent_memory, agent_pids, [agents.NAME] cpu / memory / \
                 pids) or turn cgroups on",
                c.mode
            );
        }
        Ok(c)
    }

    /// Which mode is active and why, one line (`DaemonStatus.supervision`).
    pub fn mode(&self) -> &str {
        &self.mode
    }

    /// Whether processes get a cgroup (a spawn then has a layer more).
    pub fn is_active(&self) -> bool {
        self.v2.is_some() || self.v1_pids.is_some() || self.v1_memory.is_some()
    }

    /// The cgroups of agent `name` with `budget` (made on its first spawn; its limits written
    /// again when they differ), or why the budget cannot be applied.
    pub fn group(&self, name: &str, budget: cuba_protocol::Budget) -> io::Result<Arc<AgentGroup>> {
        if !self.is_active() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "budgets need cgroups, and this daemon runs without: {}",
                    self.mode
                ),
            ));
        }
        self.groups.group(&self.tree(), name, budget)
    }

    /// Every agent with a budget.
    pub fn groups(&self) -> Vec<Arc<AgentGroup>> {
        self.groups.all()
    }

    /// Where a budget's limits can go: v2 controllers enabled on demand, v1 bases made on
    /// first use (the per-process limits' own where they exist).
    fn tree(&self) -> Tree<'_> {
        Tree {
            v2: self.v2.as_deref(),
            enable_v2: Box::new(|kind: Kind| {
                let Some(base) = &self.v2 else { return false };
                let Some(parent) = base.parent() else {
                    return false;
                };
                let offered = read(&parent.join("cgroup.controllers")).unwrap_or_default();
                offered.split_whitespace().any(|c| c == kind.name())
                    && enable(parent, base, kind.name(), &self.instance).is_ok()
            }),
            v1_base: Box::new(|kind: Kind| {
                let own = match kind {
                    Kind::Pids => &self.v1_pids,
                    Kind::Memory => &self.v1_memory,
                    Kind::Cpu => &None,
                };
                match own {
                    Some(b) => Ok(b.clone()),
                    None => v1_base(
                        kind.name(),
                        &format!("cuba-exec-{}", self.instance),
                        &self.keep,
                    ),
                }
            }),
        }
    }

    /// The cgroups process `id` is in already (its v2 one `slot`): made by a previous program
    /// of this daemon (an in-place upgrade), for its stop, figures and removal.
    pub fn existing(
        &self,
        id: u64,
        slot: Option<Slot>,
        group: Option<Arc<AgentGroup>>,
    ) -> Option<Arc<ProcCgroup>> {
        if !self.is_active() {
            return None;
        }
        let (v1_pids, v1_memory) = self.v1_dirs(id, group.as_deref());
        let slot = slot.filter(|_| self.v2.is_some());
        let v2_base = group
            .as_ref()
            .and_then(|g| g.v2.as_ref())
            .or(self.v2.as_ref());
        let v2 = v2_base.zip(slot).map(|(b, s)| b.join(s.leaf.to_string()));
        let pids_max = self.pids_cap(&v2, &v1_pids);
        // Held open as for a process this program started (read by name if they cannot be).
        let files = v2
            .as_deref()
            .and_then(|d| Files::open(d).ok())
            .map(Arc::new);
        Some(Arc::new(ProcCgroup {
            v2,
            slot,
            v2_memory: self.v2_memory,
            v1_pids,
            v1_memory,
            v1_shared: Vec::new(),
            memory_max: self.limits.memory_max,
            pids_max,
            pool: None,
            killed: Default::default(),
            files,
            given_back: Default::default(),
            group,
        }))
    }

    /// Process `id`'s v1 pids and memory cgroups: under its agent's where the agent's budget
    /// is held in v1 (the process's own figures and OOM kills stay its own), else under the base
    /// where a per-process limit needs v1.
    fn v1_dirs(&self, id: u64, group: Option<&AgentGroup>) -> (Option<PathBuf>, Option<PathBuf>) {
        let leaf = id.to_string();
        let dir = |kind: Kind, base: &Option<PathBuf>| {
            let at = group.and_then(|g| g.v1(kind));
            at.or_else(|| base.clone()).map(|b| b.join(&leaf))
        };
        (
            dir(Kind::Pids, &self.v1_pids),
            dir(Kind::Memory, &self.v1_memory),
        )
    }

    /// The pids cap, and which of a process's cgroups (`v2`, `v1_pids`) holds it.
    fn pids_cap(&self, v2: &Option<PathBuf>, v1_pids: &Option<PathBuf>) -> Option<(u64, PathBuf)> {
        let dir = if self.v2_pids { v2 } else { v1_pids };
        self.limits.pids_max.zip(dir.clone())
    }

    /// The per-process cgroups of process `id`, made (or taken from the pool) and with their
    /// limits set, the v2 directory and the v1 `tasks` open for the child to be born
    /// in or to enter before its exec.
    pub fn prepare(&self, id: u64, group: Option<&Arc<AgentGroup>>) -> io::Result<Placement> {
        let in_group = group.and_then(|g| g.v2.as_ref());
        let taken = self.pool.as_ref().map(|p| match in_group {
            // Made in the agent's cgroup, never pooled: a cgroup cannot change its parent.
            Some(_) => super::cgroup_pool::Taken {
                slot: Slot {
                    leaf: p.next_leaf(),
                    cpu_base_us: 0,
                },
                exists: false,
                configured: false,
                files: None,
            },
            None => p.take(),
        });
        let v2 = match in_group {
            Some(dir) => taken.as_ref().map(|t| dir.join(t.slot.leaf.to_string())),
            None => (self.pool.as_ref().zip(taken.as_ref())).map(|(p, t)| p.dir(t.slot.leaf)),
        };
        let (v1_pids, v1_memory) = self.v1_dirs(id, group.map(|g| &**g));
        let pids_max = self.pids_cap(&v2, &v1_pids);
        let v1_shared = group.and_then(|g| g.v1(Kind::Cpu)).into_iter().collect();
        let cg = ProcCgroup {
            v2,
            slot: taken.as_ref().map(|t| t.slot),
            v2_memory: self.v2_memory,
            v1_pids,
            v1_memory,
            v1_shared,
            memory_max: self.limits.memory_max,
            pids_max,
            pool: self.pool.clone().filter(|_| in_group.is_none()),
            killed: Default::default(),
            files: None,
            given_back: Default::default(),
            group: group.cloned(),
        };
        let mut limits: Vec<(Option<PathBuf>, &str, u64)> = Vec::new();
        if let Some(n) = self.limits.pids_max {
            let file = if self.v2_pids {
                "pids.max"
            } else {
                V1::PIDS_MAX
            };
            let dir = if self.v2_pids { &cg.v2 } else { &cg.v1_pids };
            limits.push((dir.clone(), file, n));
        }
        if let Some(n) = self.limits.memory_max {
            let file = if self.v2_memory {
                "memory.max"
            } else {
                V1::MEMORY_MAX
            };
            let dir = if self.v2_memory {
                &cg.v2
            } else {
                &cg.v1_memory
            };
            limits.push((dir.clone(), file, n));
        }
        let (state, files) = taken.map_or(((false, false), None), |t| {
            ((t.exists, t.configured), t.files)
        });
        Placement::make(cg, &limits, state, files)
    }

    /// At an orderly shutdown, once every process was stopped: the (empty) per-process cgroups
    /// still there and the bases go.
    pub fn remove(&self) {
        if let Some(pool) = &self.pool {
            pool.close();
        }
        let budget_bases = self.groups.v1_bases();
        let bases = [&self.v2, &self.v1_pids, &self.v1_memory]
            .into_iter()
            .flatten();
        for base in bases.chain(&budget_bases) {
            remove_below(base);
            if let Err(e) = fs::remove_dir(base) {
                tracing::debug!("cannot remove {}: {e}", base.display());
            }
        }
    }

    fn describe(&self, no_v2: Option<String>) -> String {
        let mut via = Vec::new();
        let mut v1 = Vec::new();
        for (on, name) in [(self.v2_pids, "pids"), (self.v2_memory, "memory")] {
            if on {
                via.push(name);
            }
        }
        if self.v1_pids.is_some() {
            v1.push("pids");
        }
        if self.v1_memory.is_some() {
            v1.push("memory");
        }
        let mut text = match (&self.v2, no_v2) {
            (Some(base), _) => format!("cgroup v2 at {}", base.display()),
            (None, why) => format!(
                "process groups + /proc tree walk: {}",
                why.unwrap_or_else(|| "no cgroup v2 tree".into())
            ),
        };
        if !via.is_empty() {
            text.push_str(&format!("; cgroup v2 controllers {}", via.join(", ")));
        }
        if !v1.is_empty() {
            text.push_str(&format!("; limits via cgroup v1 {}", v1.join(", ")));
        }
        text
    }

    /// A trial per-process cgroup: the limit files must be there and writable, and in `auto`
    /// mode placing a process must be cheap (see [`costly`]).
    fn probe(&self, mode: &CgroupMode) -> Result<()> {
        if !self.is_active() {
            return Ok(());
        }
        let placement = self
            .prepare(0, None)
            .context("cannot make a trial per-process cgroup")?;
        let costly = costly(mode, &self.limits, &placement);
        let cgroup = placement.handle();
        drop(placement);
        match costly {
            Some(why) => {
                cgroup.remove();
                Err(anyhow::anyhow!(why))
            }
            // The trial cgroup is the pool's first (or its spare is made).
            None => {
                cgroup.release();
                Ok(())
            }
        }
    }
}

/// Why `auto` mode goes without per-process cgroups, if it does: a child born in its cgroup
/// (clone3 with `CLONE_INTO_CGROUP`, Linux 5.7) costs nothing, but entering one is a migration,
/// which on a cgroup2 tree mounted without `favordynmods` waits for an RCU grace period (~12 ms
/// here). So without the former and the latter, `auto` goes without. Limits that need a
/// cgroup, `cgroups = "on"` or a `cgroup_parent` take them whatever the cost.
fn costly(mode: &CgroupMode, limits: &Limits, trial: &Placement) -> Option<String> {
    if *mode != CgroupMode::Auto || limits.wants_cgroup() || trial.can_start_inside() {
        return None;
    }
    let cheap = mounts()
        .ok()?
        .into_iter()
        .find(|m| m.fstype == "cgroup2")
        .is_some_and(|m| m.options.split(',').any(|o| o == "favordynmods"));
    (!cheap).then(|| {
        "this kernel cannot start a process in its cgroup (clone3 CLONE_INTO_CGROUP, Linux \
         5.7), and moving one there costs milliseconds per spawn (the cgroup2 tree is not \
         mounted with favordynmods); cgroups = \"on\" (CUBA_EXEC_CGROUPS=on) takes them anyway"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::cgroup_proc::empty_now;
    use super::*;

    fn none() -> (&'static HashSet<u64>, &'static HashSet<u64>) {
        static EMPTY: std::sync::LazyLock<HashSet<u64>> = std::sync::LazyLock::new(HashSet::new);
        (&EMPTY, &EMPTY)
    }

    #[test]
    fn off_is_the_fallback_and_says_so() {
        let c = Cgroups::setup(&CgroupMode::Off, &Limits::default(), "t", none()).unwrap();
        assert!(!c.is_active());
        assert!(
            c.mode().starts_with("process groups + /proc tree walk"),
            "{}",
            c.mode()
        );
        assert!(c.mode().contains("off"), "{}", c.mode());
    }

    #[test]
    fn a_parent_that_is_not_a_cgroup_falls_back() {
        let mode = CgroupMode::Parent("/nonexistent/cg".into());
        let c = Cgroups::setup(&mode, &Limits::default(), "t", none()).unwrap();
        assert!(!c.is_active());
        assert!(c.mode().contains("/nonexistent/cg"), "{}", c.mode());
    }

    /// A daemon's cgroups on the real tree (`on`), removed with whatever is left however the
    /// test ends; `None` where no cgroup v2 tree is writable.
    fn real(instance: &str) -> Option<(Cgroups, Rm)> {
        let c = Cgroups::setup(&CgroupMode::On, &Limits::default(), instance, none()).unwrap();
        let Some(base) = c.v2.clone() else {
            // The machine decides whether there should be one, not the code under test.
            let machine = cuba_tests::machine::writable_cgroup_v2();
            assert!(
                machine.is_none(),
                "{machine:?} is writable, yet: {}",
                c.mode()
            );
            cuba_tests::machine::skip("cgroups (unit)", &format!("no writable tree: {}", c.mode()));
            return None;
        };
        Some((c, Rm(base)))
    }

    struct Rm(PathBuf);

    impl Drop for Rm {
        fn drop(&mut self) {
            // A failed assertion may leave a process in one: killed and waited for first.
            for e in fs::read_dir(&self.0).into_iter().flatten().flatten() {
                empty_now(&e.path());
                let _ = fs::remove_dir(e.path());
            }
            let _ = fs::remove_dir(&self.0);
        }
    }

    #[test]
    fn a_child_is_in_its_cgroup_from_its_first_instruction() {
        let instance = format!("unit{}", std::process::id());
        let Some((c, rm)) = real(&instance) else {
            return;
        };
        let base = rm.0.clone();
        use crate::platform::spawn::{tests::capture_by, Spawn};
        // Born in it (clone3), and moved there first of all by the fallback start.
        let starts: [fn(Spawn) -> io::Result<i32>; 2] = [Spawn::start, Spawn::start_std];
        for start in starts {
            let placement = c.prepare(7, None).unwrap();
            let cg = placement.handle();
            let leaf = cg.slot().unwrap().leaf;
            let mut cmd = Spawn::new("/bin/sh");
            cmd.arg("-c").arg("cat /proc/self/cgroup");
            placement.install(&mut cmd);
            let (status, text) = capture_by(cmd, start);
            assert_eq!(status, 0, "{text}");
            drop(placement);
            let want = format!("/cuba-exec-{instance}/{leaf}");
            assert!(
                text.lines()
                    .any(|l| l.starts_with("0::") && l.ends_with(&want)),
                "{text}"
            );
            assert!(!cg.populated(), "the child was reaped");
            assert!(cg.usage().cpu_ms.is_some(), "cpu.stat is readable");
            cg.remove();
            assert!(!base.join(leaf.to_string()).exists());
        }
    }

    #[test]
    fn an_emptied_cgroup_serves_the_next_process_with_its_cpu_counted_apart() {
        let instance = format!("unitpool{}", std::process::id());
        let Some((c, _rm)) = real(&instance) else {
            return;
        };
        use crate::platform::spawn::{tests::capture_by, Spawn};
        let run = |script: &str| {
            let placement = c.prepare(1, None).unwrap();
            let cg = placement.handle();
            let mut cmd = Spawn::new("/bin/sh");
            cmd.arg("-c").arg(script);
            placement.install(&mut cmd);
            let (status, text) = capture_by(cmd, Spawn::start);
            assert_eq!(status, 0, "{text}");
            cg
        };
        // Enough CPU to be counted in milliseconds.
        let busy = run("i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done");
        let spent = busy.final_usage().cpu_ms.unwrap();
        assert!(spent > 0, "the loop ran {spent} ms");
        // Empty and never killed: back in the pool at once, on the caller's thread (and the
        // release that follows, off the runtime, has nothing left to do).
        assert_eq!(busy.give_back(), !c.v2_memory);
        busy.release();
        let next = c.prepare(2, None).unwrap().handle();
        assert!(
            next.files.is_some(),
            "its cgroup.events and cpu.stat come open"
        );
        if c.v2_memory {
            // Memory figures cannot be told apart in a reused cgroup: a new one.
            assert_ne!(next.slot().unwrap().leaf, busy.slot().unwrap().leaf);
        } else {
            assert_eq!(
                next.slot().unwrap().leaf,
                busy.slot().unwrap().leaf,
                "not reused"
            );
            assert_eq!(
                next.usage().cpu_ms,
                Some(0),
                "the earlier process's CPU counted"
            );
        }
        // A stop that finds it empty writes no `cgroup.kill`: it can serve again.
        assert_eq!(next.kill(), Some(0));
        next.release();
        // A cgroup still holding a process is not handed on.
        let held = run("sleep 30 >/dev/null 2>&1 &");
        let leaf = held.slot().unwrap().leaf;
        if !c.v2_memory {
            assert_eq!(
                leaf,
                next.slot().unwrap().leaf,
                "not reused after a kill of nothing"
            );
        }
        assert!(!held.give_back(), "a populated cgroup went back");
        held.release();
        let after = c.prepare(3, None).unwrap().handle();
        assert_ne!(
            after.slot().unwrap().leaf,
            leaf,
            "a populated cgroup was reused"
        );
        // Killed and waited for, so that the cgroups can go.
        assert!(!empty_now(held.v2.as_deref().unwrap()));
        held.remove();
        after.release();
        // A cgroup that `cgroup.kill` emptied serves no later process: the kernel would kill
        // every child born in it. The next one is new, and its process runs.
        let killed = run("sleep 30 >/dev/null 2>&1 &");
        assert!(killed.kill().is_some());
        empty_now(killed.v2.as_deref().unwrap());
        killed.release();
        let placement = c.prepare(4, None).unwrap();
        let next = placement.handle();
        assert_ne!(next.slot().unwrap().leaf, killed.slot().unwrap().leaf);
        let mut cmd = Spawn::new("/bin/sh");
        cmd.arg("-c").arg("echo alive");
        placement.install(&mut cmd);
        let (status, text) = capture_by(cmd, Spawn::start);
        assert_eq!((status, text.trim()), (0, "alive"));
        next.remove();
    }
}
