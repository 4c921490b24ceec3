//! Budgets per agent: which agent's budget a new process counts against, what each agent uses
//! against its budget, and the watch that makes a budget reached an event and a sentence in its
//! processes' rows, never a silent slowdown.
//!
//! The agent is the client that asked, by name (an MCP client's `clientInfo.name`, a token's
//! name, `cubactl`), with the budget of its `[agents.NAME]` table (or `agent_*` for every MCP
//! client) and its token's, the tighter of each. A connection from inside a process tree is that
//! tree's agent whatever it calls itself, so a command cannot leave its agent's budget by
//! starting another through cubactl or a shim of its own; inside a tree that cannot be told,
//! the tightest budget of any agent holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cuba_protocol::{cores, now_ms, Budget, BudgetHit, BudgetUse, EventKind};
use tokio::sync::Notify;

use crate::base::config::Agents;
use crate::platform::cgroup::{AgentGroup, BudgetSample, Cgroups};
use crate::state::caller::Caller;
use crate::state::table::Table;

/// How often the watch reads each agent's counters.
const TICK: Duration = Duration::from_secs(1);
/// A limit reached again within this of the last time is the same episode: one event.
const EPISODE: Duration = Duration::from_secs(30);

pub struct Budgets {
    agents: Arc<Agents>,
    cgroups: Arc<Cgroups>,
    /// A token's budget by its name: the HTTP tokens' budgets hold their callers (set once
    /// the daemon has them).
    tokens: OnceLock<TokenBudgets>,
    /// What the watch saw last, by agent.
    seen: Mutex<HashMap<String, Seen>>,
    /// Wakes the watch when the first agent gets its cgroups.
    first: Notify,
}

/// A token's budget by the token's name.
pub type TokenBudgets = Box<dyn Fn(&str) -> Option<Budget> + Send + Sync>;

/// The watch's last look at one agent.
#[derive(Default)]
struct Seen {
    at: Option<Instant>,
    sample: BudgetSample,
    /// CPU in use over the last tick, thousandths of a core.
    cpu_millis: Option<u32>,
    /// When each limit (cpu, memory, pids) was last reached.
    reached: [Option<Instant>; 3],
}

impl Budgets {
    pub fn new(agents: Arc<Agents>, cgroups: Arc<Cgroups>) -> Budgets {
        Budgets {
            agents,
            cgroups,
            tokens: OnceLock::new(),
            seen: Mutex::new(HashMap::new()),
            first: Notify::new(),
        }
    }

    pub fn agents(&self) -> &Arc<Agents> {
        &self.agents
    }

    pub fn set_tokens(&self, tokens: TokenBudgets) {
        let _ = self.tokens.set(tokens);
    }

    /// Whether a budget can be applied here (a token's, when it is made).
    pub fn can_apply(&self) -> Result<(), String> {
        match self.cgroups.is_active() && cfg!(target_os = "linux") {
            true => Ok(()),
            false => Err(format!(
                "budgets need Linux cgroups, and this daemon runs without: {}",
                self.cgroups.mode()
            )),
        }
    }

    /// The agent and budget of what `caller` starts, by name: `None` when it has none.
    fn of(&self, caller: &Caller) -> Option<(String, Budget)> {
        if caller.inside.is_some() {
            // Inside a tree that cannot be told (a known one is its agent's: see `group`).
            return Some(("unknown-tree".into(), self.agents.tightest()?));
        }
        let own = self.agents.budget(&caller.client);
        let token = (self.tokens.get()).and_then(|t| t(&caller.client.name));
        let budget = match (own, token) {
            (Some(a), Some(b)) => a.tighter(b),
            (a, b) => a.or(b)?,
        };
        Some((caller.client.name.clone(), budget))
    }

    /// The cgroups of the agent whose budget holds what `caller` starts: a tree's own agent
    /// for a connection from inside it. An error says why the budget cannot be applied.
    pub fn group(&self, caller: &Caller, table: &Table) -> Result<Option<Arc<AgentGroup>>, String> {
        if let Some(tree) = caller.tree() {
            return Ok(tree_agent(table, tree));
        }
        let Some((name, budget)) = self.of(caller) else {
            return Ok(None);
        };
        let group = (self.cgroups.group(&name, budget)).map_err(|e| e.to_string())?;
        // The watch starts with the first agent's cgroups (a permit kept once it runs).
        self.first.notify_one();
        Ok(Some(group))
    }

    /// What agents use against their budgets, as `caller` may see them: its own agent's
    /// first, then (for an unconfined caller) every other agent that runs something now. A
    /// listing stays small however many agents once ran.
    pub fn uses(&self, caller: &Caller, table: &Table) -> Vec<BudgetUse> {
        // Its own agent's, by name: a listing makes no cgroup.
        let own = match caller.tree() {
            Some(tree) => tree_agent(table, tree).map(|g| g.name().to_string()),
            None => self.of(caller).map(|(name, _)| name),
        };
        let confined = caller.tenant.is_some();
        let seen = lock(&self.seen);
        let mut uses: Vec<BudgetUse> = (self.cgroups.groups().iter())
            .filter(|g| match own.as_deref() == Some(g.name()) {
                true => true,
                false => !confined && !g.idle(),
            })
            .map(|g| {
                let s = g.sample();
                let last = seen.get(g.name());
                BudgetUse {
                    agent: g.name().to_string(),
                    budget: g.budget(),
                    cpu_millis: last.and_then(|l| l.cpu_millis),
                    memory: s.memory,
                    pids: s.pids,
                    throttled_ms: s.throttled.map(|(_, us)| us / 1000),
                    last_hit: g.last_hit(),
                }
            })
            .collect();
        // Its own first, then by name.
        uses.sort_by_key(|u| (own.as_deref() != Some(u.agent.as_str()), u.agent.clone()));
        uses
    }

    /// Reads every agent's counters each [`TICK`] once there is one, for as long as the daemon
    /// runs.
    pub async fn watch(self: Arc<Self>, table: Arc<Table>) {
        if self.cgroups.groups().is_empty() {
            self.first.notified().await;
        }
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let groups = self.cgroups.groups();
            // An agent whose cgroups made room for others is forgotten.
            lock(&self.seen).retain(|name, _| groups.iter().any(|g| g.name() == name));
            // A few small files per agent: off the runtime's threads.
            let me = self.clone();
            let table = table.clone();
            let done = tokio::task::spawn_blocking(move || {
                for g in &groups {
                    me.look(g, &table);
                }
            });
            if done.await.is_err() {
                tracing::warn!("the budgets' watch failed once");
            }
        }
    }

    /// One look at agent `g`: its CPU rate, and each limit it reached since the last look.
    fn look(&self, g: &Arc<AgentGroup>, table: &Table) {
        let now = Instant::now();
        let s = g.sample();
        let mut hits = Vec::new();
        {
            let mut seen = lock(&self.seen);
            let last = seen.entry(g.name().to_string()).or_default();
            let Some(at) = last.at.replace(now) else {
                last.sample = s;
                return;
            };
            let ms = now.saturating_duration_since(at).as_millis().max(1) as u64;
            let before = std::mem::replace(&mut last.sample, s);
            last.cpu_millis = s
                .cpu_us
                .zip(before.cpu_us)
                .map(|(a, b)| u32::try_from(a.saturating_sub(b) / ms).unwrap_or(u32::MAX));
            let budget = g.budget();
            for (i, detail) in reached(g.name(), &budget, &before, &s, ms)
                .into_iter()
                .enumerate()
            {
                let Some((what, detail)) = detail else {
                    continue;
                };
                let new = last.reached[i].is_none_or(|t| now.duration_since(t) > EPISODE);
                last.reached[i] = Some(now);
                hits.push((what, detail, new));
            }
        }
        for (what, detail, new) in hits {
            g.set_hit(BudgetHit {
                what: what.to_string(),
                detail: detail.clone(),
                at_ms: now_ms(),
            });
            if !new {
                continue;
            }
            tracing::info!("budget: {detail}");
            // The event is its newest process's (a running one first), so a confined agent
            // sees its own.
            let of_agent = |p: &Arc<crate::state::record::Proc>, running: bool| {
                let rec = p.lock();
                let agent = rec.cgroup.as_ref().and_then(|c| c.agent().cloned());
                (!running || !rec.finished()) && agent.is_some_and(|a| Arc::ptr_eq(&a, g))
            };
            let all = table.all();
            let target = (all.iter().rev().find(|p| of_agent(p, true)))
                .or_else(|| all.iter().rev().find(|p| of_agent(p, false)));
            if let Some(p) = target {
                let limit = "budget".to_string();
                table.event(p, EventKind::LimitHit { limit, detail });
            }
        }
    }
}

/// The agent whose budget holds the tree of process `tree`, if one does.
fn tree_agent(table: &Table, tree: u64) -> Option<Arc<AgentGroup>> {
    let p = table.get(tree).ok()?;
    let rec = p.lock();
    rec.cgroup.as_ref()?.agent().cloned()
}

/// The limits agent `name` reached between two samples `ms` apart, in the order cpu, memory,
/// pids: what and a sentence saying what it meant.
fn reached(
    name: &str,
    b: &Budget,
    before: &BudgetSample,
    now: &BudgetSample,
    ms: u64,
) -> [Option<(&'static str, String)>; 3] {
    let more = |a: Option<u64>, b: Option<u64>| a.zip(b).map_or(0, |(a, b)| a.saturating_sub(b));
    let cpu = b.cpu_millis.and_then(|max| {
        let (n, us) = now.throttled?;
        let (n0, us0) = before.throttled?;
        (n > n0).then(|| {
            let held = (us.saturating_sub(us0) / 1000).min(ms * 64);
            format!(
                "the cpu budget of agent {name} ({} cores) was reached: its processes were held \
                 back {:.1} s over the last {:.0} s ({:.1} s in all)",
                cores(max),
                held as f64 / 1000.0,
                ms as f64 / 1000.0,
                us as f64 / 1e6
            )
        })
    });
    let memory = b.memory.and_then(|max| {
        let (hits, kills) = now.memory_hits?;
        let (hits0, kills0) = before.memory_hits?;
        let max = cuba_protocol::bytes_text(max);
        match (kills.saturating_sub(kills0), hits.saturating_sub(hits0)) {
            (0, 0) => None,
            (0, _) => Some(format!(
                "the memory budget of agent {name} ({max}) was reached: the kernel reclaims its \
                 memory, which slows its processes"
            )),
            (n, _) => Some(format!(
                "the memory budget of agent {name} ({max}) was reached: the kernel killed {n} \
                 of its processes (out of memory)"
            )),
        }
    });
    let pids = b
        .pids
        .and_then(|max| match more(now.pids_hits, before.pids_hits) {
            // Where the budget is held in v1 the kernel counts refusals in the forking process's
            // own cgroup (read at its end): here, a budget full is a budget reached.
            0 if now.pids.is_some_and(|n| n >= max) => Some(format!(
                "the pids budget of agent {name} ({max} processes) was reached: all are in use, \
             and the kernel refuses more forks (\"Resource temporarily unavailable\")"
            )),
            0 => None,
            n => Some(format!(
            "the pids budget of agent {name} ({max} processes) was reached: the kernel refused \
             {n} forks (\"Resource temporarily unavailable\")"
        )),
        });
    [
        cpu.map(|d| ("cpu", d)),
        memory.map(|d| ("memory", d)),
        pids.map(|d| ("pids", d)),
    ]
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data: a panic cannot leave it inconsistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_reached_is_said_in_words() {
        let b = Budget {
            cpu_millis: Some(500),
            memory: Some(64 << 20),
            pids: Some(16),
        };
        let before = BudgetSample {
            throttled: Some((3, 100_000)),
            memory_hits: Some((0, 0)),
            pids_hits: Some(0),
            ..Default::default()
        };
        assert_eq!(reached("a", &b, &before, &before, 1000), [None, None, None]);
        let now = BudgetSample {
            throttled: Some((9, 700_000)),
            memory_hits: Some((4, 1)),
            pids_hits: Some(5),
            ..Default::default()
        };
        let [cpu, memory, pids] = reached("a", &b, &before, &now, 1000);
        let cpu = cpu.expect("cpu").1;
        assert!(
            cpu.contains("0.5 cores") && cpu.contains("held back 0.6 s"),
            "{cpu}"
        );
        let memory = memory.expect("memory").1;
        assert!(
            memory.contains("64 MiB") && memory.contains("killed 1"),
            "{memory}"
        );
        assert!(pids.expect("pids").1.contains("refused 5 forks"));
    }
}
