//! Budgets per agent (Linux): a cgroup per agent, `agent.NAME`, above its processes' cgroups,
//! holding the limits over all of its trees together.
//!
//! In the v2 tree the agent's cgroup is `<base>/agent.NAME` and its processes' cgroups are made
//! inside it (not taken from the pool: a pooled cgroup cannot move under another parent). A
//! limit goes in v2 where the tree offers its controller (`cpu.max`, `memory.max`, `pids.max`),
//! else in that controller's v1 hierarchy, `<v1 base>/agent.NAME`: for memory and pids the
//! process's own v1 cgroup is made inside it (its figures and OOM kills stay its own), for cpu
//! the process enters the agent's cgroup itself. A child cannot leave what it was born in: every
//! process of the tree, `setsid` or double fork, counts against the budget (unless it can write
//! the cgroup tree, which the sandbox forbids).
//!
//! The agent's cgroups stay while the daemon runs and go with the daemon's at shutdown, or as
//! leftovers at the next start. At most [`MAX_GROUPS`] are kept: names come from clients, so
//! when that many exist, those running nothing make room.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use cuba_protocol::{Budget, BudgetHit};

use super::cgroup_files::{field, read, read_small};

/// Agents with a cgroup of their own: names come from clients, so they are bounded.
pub const MAX_GROUPS: usize = 256;
/// The CPU period the quota is a part of, microseconds (the kernel's default).
const PERIOD_US: u64 = 100_000;

/// The controllers a budget limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Cpu,
    Memory,
    Pids,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Cpu, Kind::Memory, Kind::Pids];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Memory => "memory",
            Kind::Pids => "pids",
        }
    }

    fn of(self, b: &Budget) -> Option<u64> {
        match self {
            Kind::Cpu => b.cpu_millis.map(u64::from),
            Kind::Memory => b.memory,
            Kind::Pids => b.pids,
        }
    }

    /// The file and value that hold `limit` in v2, or in v1.
    fn file(self, v2: bool, limit: u64) -> (&'static str, String) {
        match (self, v2) {
            (Kind::Cpu, true) => ("cpu.max", format!("{} {PERIOD_US}", quota(limit))),
            (Kind::Cpu, false) => ("cpu.cfs_quota_us", quota(limit).to_string()),
            (Kind::Memory, true) => ("memory.max", limit.to_string()),
            (Kind::Memory, false) => ("memory.limit_in_bytes", limit.to_string()),
            (Kind::Pids, _) => ("pids.max", limit.to_string()),
        }
    }
}

/// Thousandths of a core as microseconds per period.
fn quota(millis: u64) -> u64 {
    (millis * PERIOD_US / 1000).max(1000)
}

/// The directory name of agent `name`: what a cgroup name may hold, and a hash of the name when
/// that is not the name itself (so two names never share one).
pub fn dir_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .take(64)
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '_',
        })
        .collect();
    if clean == name {
        return format!("agent.{clean}");
    }
    // FNV-1a: stable across programs (an upgrade finds the same directory).
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("agent.{clean}-{:08x}", hash as u32)
}

/// Whether `dir` is an agent's cgroup.
pub fn is_agent_dir(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("agent."))
}

/// One agent's cgroups and where each limit of its budget is held.
#[derive(Debug)]
pub struct AgentGroup {
    name: String,
    budget: Mutex<Budget>,
    /// `<v2 base>/agent.NAME`: its processes' v2 cgroups are made in it.
    pub(super) v2: Option<PathBuf>,
    /// Each limit's cgroup: the v2 one, or the v1 one of its controller (a limit of a kind the
    /// agent did not have before is placed when its budget gains it).
    at: Mutex<HashMap<Kind, (PathBuf, bool)>>,
    /// `agent.NAME`, its directory's name in each hierarchy.
    dir: String,
    /// The last time it reached a limit (set by the budgets' watch).
    hit: Mutex<Option<BudgetHit>>,
}

pub use crate::platform::usage::BudgetSample as Sample;

impl AgentGroup {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn budget(&self) -> Budget {
        *lock(&self.budget)
    }

    /// The last time it reached a limit.
    pub fn last_hit(&self) -> Option<BudgetHit> {
        lock(&self.hit).clone()
    }

    pub fn set_hit(&self, hit: BudgetHit) {
        *lock(&self.hit) = Some(hit);
    }

    /// The v1 cgroup of `kind`'s limit, where it is held in v1.
    pub(super) fn v1(&self, kind: Kind) -> Option<PathBuf> {
        let at = lock(&self.at);
        at.get(&kind).filter(|(_, v2)| !v2).map(|(d, _)| d.clone())
    }

    /// Writes `budget`'s limits (a token replaced with another budget, or the same again).
    fn apply(&self, budget: Budget) -> io::Result<()> {
        for (kind, (dir, v2)) in lock(&self.at).iter() {
            let (file, value) = match kind.of(&budget) {
                Some(limit) => kind.file(*v2, limit),
                // Lifted: the kernel's "no limit".
                None => (kind.file(*v2, 0).0, unlimited(*kind, *v2)),
            };
            fs::write(dir.join(file), value).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot set the {} budget of agent {} in {}: {e}",
                        kind.name(),
                        self.name,
                        dir.display()
                    ),
                )
            })?;
        }
        *lock(&self.budget) = budget;
        Ok(())
    }

    /// Its counters now: a few small files.
    pub fn sample(&self) -> Sample {
        let mut s = Sample::default();
        if let Some(v2) = &self.v2 {
            let stat = read_small(&v2.join("cpu.stat")).unwrap_or_default();
            s.cpu_us = field(&stat, "usage_usec");
        }
        let num = |p: PathBuf| read_small(&p).and_then(|t| t.trim().parse::<u64>().ok());
        for (kind, (dir, v2)) in lock(&self.at).iter() {
            match (kind, v2) {
                (Kind::Cpu, true) => {
                    let stat = read_small(&dir.join("cpu.stat")).unwrap_or_default();
                    s.throttled = field(&stat, "nr_throttled").zip(field(&stat, "throttled_usec"));
                }
                (Kind::Cpu, false) => {
                    let stat = read_small(&dir.join("cpu.stat")).unwrap_or_default();
                    s.throttled = field(&stat, "nr_throttled")
                        .zip(field(&stat, "throttled_time").map(|ns| ns / 1000));
                }
                (Kind::Memory, true) => {
                    s.memory = num(dir.join("memory.current"));
                    let events = read_small(&dir.join("memory.events")).unwrap_or_default();
                    s.memory_hits = field(&events, "max").zip(field(&events, "oom_kill"));
                }
                (Kind::Memory, false) => {
                    s.memory = num(dir.join("memory.usage_in_bytes"));
                    let oom = read(&dir.join("memory.oom_control")).unwrap_or_default();
                    s.memory_hits = num(dir.join("memory.failcnt")).zip(field(&oom, "oom_kill"));
                }
                (Kind::Pids, _) => {
                    s.pids = num(dir.join("pids.current"));
                    let events = read_small(&dir.join("pids.events")).unwrap_or_default();
                    s.pids_hits = field(&events, "max");
                }
            }
        }
        s
    }

    /// Forks refused at the pids budget in the v1 cgroup `own` of a tree that ended, in a
    /// sentence, recorded as the last hit. In v1 the kernel counts a refusal in the forking
    /// process's own cgroup, which goes with it: read at its end, or never.
    pub fn forks_refused_in(&self, own: Option<&Path>) -> Option<String> {
        let max = self.budget().pids?;
        let dir = own.filter(|_| self.v1(Kind::Pids).is_some())?;
        let n = field(&read_small(&dir.join("pids.events"))?, "max").filter(|n| *n > 0)?;
        let detail = format!(
            "the pids budget of agent {} ({max} processes) was reached: the kernel refused {n} \
             forks of this tree (\"Resource temporarily unavailable\")",
            self.name
        );
        self.set_hit(BudgetHit {
            what: "pids".into(),
            detail: detail.clone(),
            at_ms: cuba_protocol::now_ms(),
        });
        Some(detail)
    }

    /// Why the kernel killed a process of it for memory, in words: its budget.
    pub fn memory_reason(&self) -> Option<String> {
        let max = self.budget().memory?;
        Some(format!(
            "the memory budget of agent {} ({}) over all its processes",
            self.name,
            cuba_protocol::bytes_text(max)
        ))
    }

    /// Whether none of its processes runs: its v2 cgroup is not populated, or (v1 only) none
    /// of its v1 cgroups holds a process or a process's cgroup.
    pub fn idle(&self) -> bool {
        if let Some(v2) = &self.v2 {
            return !super::cgroup_files::populated(v2);
        }
        lock(&self.at).values().all(|(dir, _)| {
            let procs = read_small(&dir.join("cgroup.procs")).unwrap_or_default();
            let leaves = fs::read_dir(dir).into_iter().flatten().flatten();
            procs.trim().is_empty() && !leaves.into_iter().any(|e| e.path().is_dir())
        })
    }

    /// Its cgroups go (each empty: at shutdown, once every process was stopped).
    pub(super) fn remove(&self) {
        let at = lock(&self.at);
        for dir in self.v2.iter().chain(at.values().map(|(d, _)| d)) {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// Makes agent `name`'s cgroup `d` (there already: an earlier program's, handed over).
fn made(d: &Path, name: &str) -> io::Result<()> {
    match fs::create_dir(d) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(io::Error::new(
            e.kind(),
            format!(
                "cannot make the cgroup {} of agent {name}: {e}",
                d.display()
            ),
        )),
        _ => Ok(()),
    }
}

fn unlimited(kind: Kind, v2: bool) -> String {
    match (kind, v2) {
        (Kind::Cpu, true) => format!("max {PERIOD_US}"),
        (Kind::Cpu, false) => "-1".into(),
        (Kind::Memory, false) => "-1".into(),
        _ => "max".into(),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain data: a panic cannot leave it inconsistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The agents' cgroups of one daemon: made on an agent's first spawn.
#[derive(Debug, Default)]
pub struct Groups {
    groups: Mutex<HashMap<String, Arc<AgentGroup>>>,
    /// v1 bases made for budgets, by controller.
    v1: Mutex<HashMap<Kind, PathBuf>>,
}

/// Where a daemon's cgroups are, for [`Groups::group`].
pub struct Tree<'a> {
    /// `<parent>/cuba-exec-<instance>` in v2.
    pub v2: Option<&'a Path>,
    /// Enables a v2 controller for the base's children; whether it is.
    pub enable_v2: Box<dyn Fn(Kind) -> bool + 'a>,
    /// The v1 base of a controller (made, leftovers removed, on first use).
    pub v1_base: Box<dyn Fn(Kind) -> anyhow::Result<PathBuf> + 'a>,
}

impl Groups {
    /// The cgroups of agent `name` with `budget` written: made on its first spawn, its limits
    /// written again when the budget differs (a kind it gains placed then: in v1 it holds what
    /// starts after).
    pub fn group(&self, tree: &Tree, name: &str, budget: Budget) -> io::Result<Arc<AgentGroup>> {
        let mut groups = lock(&self.groups);
        if let Some(g) = groups.get(name) {
            if g.budget() != budget {
                self.place(tree, g, &budget)?;
                g.apply(budget)?;
            }
            return Ok(g.clone());
        }
        if groups.len() >= MAX_GROUPS {
            // Those that run nothing make room (a later spawn of theirs makes them again).
            groups.retain(|_, g| {
                let idle = g.idle();
                if idle {
                    g.remove();
                }
                !idle
            });
        }
        if groups.len() >= MAX_GROUPS {
            return Err(io::Error::other(format!(
                "{MAX_GROUPS} agents have a budget already; agent {name} cannot get one"
            )));
        }
        let dir = dir_name(name);
        let v2 = tree.v2.map(|b| b.join(&dir));
        if let Some(d) = &v2 {
            made(d, name)?;
            // What the processes' cgroups have in the base, they have under the agent too.
            let base = d.parent().unwrap_or(d);
            let control = read(&base.join("cgroup.subtree_control")).unwrap_or_default();
            for c in control.split_whitespace() {
                let _ = fs::write(d.join("cgroup.subtree_control"), format!("+{c}"));
            }
        }
        let group = AgentGroup {
            name: name.to_string(),
            budget: Mutex::new(Budget::default()),
            v2,
            at: Mutex::new(HashMap::new()),
            dir,
            hit: Mutex::new(None),
        };
        if let Err(e) = self
            .place(tree, &group, &budget)
            .and_then(|()| group.apply(budget))
        {
            group.remove();
            return Err(e);
        }
        let group = Arc::new(group);
        groups.insert(name.to_string(), group.clone());
        Ok(group)
    }

    /// Finds a place for each limit of `budget` that `g` has none for yet: its v2 cgroup where
    /// the tree offers the controller, else its cgroup in the controller's v1 hierarchy.
    fn place(&self, tree: &Tree, g: &AgentGroup, budget: &Budget) -> io::Result<()> {
        for kind in Kind::ALL {
            if kind.of(budget).is_none() || lock(&g.at).contains_key(&kind) {
                continue;
            }
            let in_v2 = (g.v2.as_ref())
                .filter(|d| (tree.enable_v2)(kind) && d.join(kind.file(true, 1).0).exists());
            let place = match in_v2 {
                Some(d) => (d.clone(), true),
                None => {
                    let base = self.v1_base(tree, kind).map_err(|e| {
                        io::Error::other(format!(
                            "the {} budget of agent {} needs the {0} controller, in cgroup v2 \
                             or v1: {e:#}",
                            kind.name(),
                            g.name
                        ))
                    })?;
                    let d = base.join(&g.dir);
                    made(&d, &g.name)?;
                    (d, false)
                }
            };
            lock(&g.at).insert(kind, place);
        }
        Ok(())
    }

    fn v1_base(&self, tree: &Tree, kind: Kind) -> anyhow::Result<PathBuf> {
        let mut v1 = lock(&self.v1);
        if let Some(b) = v1.get(&kind) {
            return Ok(b.clone());
        }
        let base = (tree.v1_base)(kind)?;
        v1.insert(kind, base.clone());
        Ok(base)
    }

    /// Every agent with a budget.
    pub fn all(&self) -> Vec<Arc<AgentGroup>> {
        lock(&self.groups).values().cloned().collect()
    }

    /// The v1 bases budgets made, for the daemon's removal at shutdown.
    pub fn v1_bases(&self) -> Vec<PathBuf> {
        lock(&self.v1).values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_directories_that_never_collide() {
        assert_eq!(dir_name("claude-code"), "agent.claude-code");
        let odd = dir_name("my agent/1");
        assert!(odd.starts_with("agent.my_agent_1-"), "{odd}");
        assert_ne!(odd, dir_name("my agent_1"));
        assert!(dir_name(&"x".repeat(300)).len() < 90);
        assert!(is_agent_dir(Path::new("/a/agent.x")));
        assert!(!is_agent_dir(Path::new("/a/12")));
    }

    #[test]
    fn a_quota_is_a_share_of_the_period() {
        assert_eq!(Kind::Cpu.file(true, 1500).1, "150000 100000");
        assert_eq!(Kind::Cpu.file(false, 500).1, "50000");
        assert_eq!(Kind::Cpu.file(false, 10).1, "1000");
    }
}
