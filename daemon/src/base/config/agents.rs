//! What becomes of commands no one attends to, per agent (the client that started them):
//! when their MCP client goes away (`client_gone`: keep them, ask the person, stop them after
//! `client_gone_grace`), and when nobody has read, waited on or followed one for
//! `unwatched_timeout`. Defaults for every client, then `[agents.NAME]` for one, by its name
//! (an MCP client's `clientInfo.name`, a token's name, `cubactl`).
//!
//! Budgets too: CPU, memory and process limits over all of one agent's trees together
//! (`agent_cpu`, `agent_memory`, `agent_pids` for each agent, `cpu`, `memory`, `pids` in its
//! table), applied by a cgroup per agent (`platform::cgroup`).
//!
//! The file's `[agents.NAME]` tables reach the daemon as `CUBA_EXEC_AGENTS`, like every other
//! key: `NAME:key=value,key=value;NAME:…`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use cuba_protocol::{Budget, ClientInfo, ClientKind};

use super::{parse_duration, parse_size};

/// What happens to a client's running commands when it goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnGone {
    /// They run on (a command waiting for input is still stopped after `orphan_timeout`).
    Keep,
    /// The person is asked, once per command: approving stops it, anything else keeps it.
    Ask,
    /// They are stopped after the grace, unless someone follows them then.
    Stop,
}

impl OnGone {
    fn parse(v: &str) -> Option<OnGone> {
        match v.trim() {
            "keep" => Some(OnGone::Keep),
            "ask" => Some(OnGone::Ask),
            "stop" => Some(OnGone::Stop),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OnGone::Keep => "keep",
            OnGone::Ask => "ask",
            OnGone::Stop => "stop",
        }
    }
}

/// One agent's rules, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    pub client_gone: OnGone,
    pub client_gone_grace: Duration,
    /// `None`: never stopped for want of attention.
    pub unwatched: Option<Duration>,
}

/// The keys an `[agents.NAME]` table sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Partial {
    client_gone: Option<OnGone>,
    client_gone_grace: Option<Duration>,
    unwatched: Option<Option<Duration>>,
    /// `Some(None)`: `off`, no limit of that kind even where the defaults set one.
    cpu: Option<Option<u32>>,
    memory: Option<Option<u64>>,
    pids: Option<Option<u64>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agents {
    client_gone: OnGone,
    client_gone_grace: Duration,
    /// For commands of MCP clients (agents); a person's are never stopped for it unless
    /// their own table says so.
    unwatched: Option<Duration>,
    /// Each agent's budget unless its table says otherwise (MCP clients only, as `unwatched`).
    budget: Budget,
    named: BTreeMap<String, Partial>,
}

impl Default for Agents {
    fn default() -> Agents {
        Agents {
            client_gone: OnGone::Keep,
            client_gone_grace: Duration::from_secs(10 * 60),
            unwatched: Some(Duration::from_secs(24 * 3600)),
            budget: Budget::default(),
            named: BTreeMap::new(),
        }
    }
}

/// `0` (or `off`) turns a timeout off.
fn timeout(name: &str, v: &str) -> Result<Option<Duration>> {
    if v.trim() == "off" {
        return Ok(None);
    }
    let d = parse_duration(v)
        .with_context(|| format!("{name}={v:?}: expected a duration (0 or off: never)"))?;
    Ok((!d.is_zero()).then_some(d))
}

/// A budget's limit: `off` (or `0`) is none.
fn limit<T>(name: &str, v: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Option<T>> {
    match v.trim() {
        "off" | "0" => Ok(None),
        t => parse(t).map(Some).with_context(|| format!("{name}={v:?}")),
    }
}

fn cpu(t: &str) -> Result<u32> {
    Budget::parse_cpu(t).map_err(anyhow::Error::msg)
}

fn pids(t: &str) -> Result<u64> {
    t.parse()
        .map_err(|_| anyhow::anyhow!("expected a number of processes, such as 256"))
}

fn on_gone(name: &str, v: &str) -> Result<OnGone> {
    OnGone::parse(v).with_context(|| format!("{name}={v:?}: expected keep, ask or stop"))
}

impl Agents {
    /// `CUBA_EXEC_CLIENT_GONE`, `CUBA_EXEC_CLIENT_GONE_GRACE`, `CUBA_EXEC_UNWATCHED_TIMEOUT`
    /// and `CUBA_EXEC_AGENTS` from `get` (set and not empty).
    pub fn apply(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(v) = get("CUBA_EXEC_CLIENT_GONE") {
            self.client_gone = on_gone("CUBA_EXEC_CLIENT_GONE", &v)?;
        }
        if let Some(v) = get("CUBA_EXEC_CLIENT_GONE_GRACE") {
            self.client_gone_grace =
                parse_duration(&v).with_context(|| format!("CUBA_EXEC_CLIENT_GONE_GRACE={v:?}"))?;
        }
        if let Some(v) = get("CUBA_EXEC_UNWATCHED_TIMEOUT") {
            self.unwatched = timeout("CUBA_EXEC_UNWATCHED_TIMEOUT", &v)?;
        }
        if let Some(v) = get("CUBA_EXEC_AGENT_CPU") {
            self.budget.cpu_millis = limit("CUBA_EXEC_AGENT_CPU", &v, cpu)?;
        }
        if let Some(v) = get("CUBA_EXEC_AGENT_MEMORY") {
            self.budget.memory = limit("CUBA_EXEC_AGENT_MEMORY", &v, parse_size)?;
        }
        if let Some(v) = get("CUBA_EXEC_AGENT_PIDS") {
            self.budget.pids = limit("CUBA_EXEC_AGENT_PIDS", &v, pids)?;
        }
        if let Some(v) = get("CUBA_EXEC_AGENTS") {
            self.named = named(&v).with_context(|| format!("CUBA_EXEC_AGENTS={v:?}"))?;
        }
        Ok(())
    }

    /// The rules for what `client` starts: its own table's keys over the defaults. A bridged
    /// client (`claude-code@laptop`) is matched by its name before the `@` too.
    pub fn rules(&self, client: &ClientInfo) -> Rules {
        let name = client.name.as_str();
        let own = self
            .named
            .get(name)
            .or_else(|| self.named.get(name.split('@').next().unwrap_or(name)));
        let agent = matches!(client.kind, ClientKind::Mcp);
        let mut rules = Rules {
            client_gone: self.client_gone,
            client_gone_grace: self.client_gone_grace,
            unwatched: self.unwatched.filter(|_| agent),
        };
        if let Some(own) = own {
            rules.client_gone = own.client_gone.unwrap_or(rules.client_gone);
            rules.client_gone_grace = own.client_gone_grace.unwrap_or(rules.client_gone_grace);
            if let Some(u) = own.unwatched {
                rules.unwatched = u;
            }
        }
        rules
    }

    /// The budget of what `client` starts, by its name: its table's limits over the defaults
    /// (which are an MCP client's only); `None` when it has none.
    pub fn budget(&self, client: &ClientInfo) -> Option<Budget> {
        let name = client.name.as_str();
        let own = self
            .named
            .get(name)
            .or_else(|| self.named.get(name.split('@').next().unwrap_or(name)));
        let mut b = match client.kind {
            ClientKind::Mcp => self.budget,
            _ => Budget::default(),
        };
        if let Some(own) = own {
            b.cpu_millis = own.cpu.unwrap_or(b.cpu_millis);
            b.memory = own.memory.unwrap_or(b.memory);
            b.pids = own.pids.unwrap_or(b.pids);
        }
        (!b.is_empty()).then_some(b)
    }

    /// Each limit the tightest any agent is given: the budget of a connection from inside a
    /// tree that cannot be told (it may not escape its own that way). `None` without budgets.
    pub fn tightest(&self) -> Option<Budget> {
        let mut all = self.named.values().map(|p| Budget {
            cpu_millis: p.cpu.flatten(),
            memory: p.memory.flatten(),
            pids: p.pids.flatten(),
        });
        let b = all.try_fold(self.budget, |acc, b| Some(acc.tighter(b)))?;
        (!b.is_empty()).then_some(b)
    }

    /// Whether any agent has a budget (the daemon then needs its cgroups).
    pub fn any_budget(&self) -> bool {
        self.tightest().is_some()
    }

    /// The settings in a few words, for `daemon status`.
    pub fn describe(&self) -> String {
        let unwatched = match self.unwatched {
            Some(d) => super::shown_duration(d),
            None => "never".into(),
        };
        let mut text = format!(
            "client gone: {} (grace {}); unwatched agents' commands stopped after {unwatched}",
            self.client_gone.as_str(),
            super::shown_duration(self.client_gone_grace)
        );
        if !self.budget.is_empty() {
            text.push_str(&format!("; each agent's budget {}", self.budget));
        }
        for name in self.named.keys() {
            text.push_str(&format!("; [agents.{name}]"));
        }
        text
    }
}

/// `NAME:key=value,key=value;NAME:…`.
fn named(text: &str) -> Result<BTreeMap<String, Partial>> {
    let mut out = BTreeMap::new();
    for item in text.split(';').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, keys)) = item.split_once(':') else {
            bail!("{item:?} is not NAME:key=value,…");
        };
        let mut p = Partial::default();
        for kv in keys.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                bail!("[agents.{name}] {kv:?} is not key=value");
            };
            match k.trim() {
                "client_gone" => p.client_gone = Some(on_gone("client_gone", v)?),
                "client_gone_grace" => {
                    p.client_gone_grace = Some(
                        parse_duration(v)
                            .with_context(|| format!("[agents.{name}] client_gone_grace"))?,
                    )
                }
                "unwatched_timeout" => p.unwatched = Some(timeout("unwatched_timeout", v)?),
                "cpu" => p.cpu = Some(limit(&format!("[agents.{name}] cpu"), v, cpu)?),
                "memory" => {
                    p.memory = Some(limit(&format!("[agents.{name}] memory"), v, parse_size)?)
                }
                "pids" => p.pids = Some(limit(&format!("[agents.{name}] pids"), v, pids)?),
                other => bail!(
                    "[agents.{name}] has no key {other:?} (client_gone, client_gone_grace, \
                     unwatched_timeout, cpu, memory, pids)"
                ),
            }
        }
        out.insert(name.trim().to_string(), p);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str, kind: ClientKind) -> ClientInfo {
        ClientInfo {
            name: name.into(),
            kind,
            pid: 0,
            cwd: Default::default(),
            env: Default::default(),
        }
    }

    #[test]
    fn defaults_keep_and_stop_unwatched_agents_only() {
        let a = Agents::default();
        let agent = a.rules(&client("claude-code", ClientKind::Mcp));
        assert_eq!(agent.client_gone, OnGone::Keep);
        assert_eq!(agent.unwatched, Some(Duration::from_secs(24 * 3600)));
        let person = a.rules(&client("cubactl", ClientKind::Cli));
        assert_eq!(person.unwatched, None);
    }

    #[test]
    fn an_agent_table_overrides_the_defaults() {
        let mut a = Agents::default();
        let env = |k: &str| match k {
            "CUBA_EXEC_CLIENT_GONE" => Some("ask".to_string()),
            "CUBA_EXEC_AGENTS" => Some(
                "codex:client_gone=stop,client_gone_grace=30s,unwatched_timeout=2h;\
                 cubactl:unwatched_timeout=1h"
                    .to_string(),
            ),
            _ => None,
        };
        a.apply(&env).expect("valid");
        let codex = a.rules(&client("codex@laptop", ClientKind::Mcp));
        assert_eq!(codex.client_gone, OnGone::Stop);
        assert_eq!(codex.client_gone_grace, Duration::from_secs(30));
        assert_eq!(codex.unwatched, Some(Duration::from_secs(7200)));
        assert_eq!(
            a.rules(&client("other", ClientKind::Mcp)).client_gone,
            OnGone::Ask
        );
        let person = a.rules(&client("cubactl", ClientKind::Cli));
        assert_eq!(person.unwatched, Some(Duration::from_secs(3600)));
        let bad = |v: &str| {
            let mut a = Agents::default();
            let v = v.to_string();
            a.apply(&|k: &str| (k == "CUBA_EXEC_AGENTS").then(|| v.clone()))
                .map_err(|e| format!("{e:#}"))
        };
        assert!(bad("x:client_gone=later")
            .expect_err("refused")
            .contains("keep, ask or stop"));
        assert!(bad("x:nope=1").expect_err("refused").contains("no key"));
        assert!(bad("x").expect_err("refused").contains("NAME:key=value"));
        assert!(bad("x:cpu=lots").expect_err("refused").contains("cores"));
        assert!(bad("x:pids=many")
            .expect_err("refused")
            .contains("processes"));
    }

    #[test]
    fn budgets_are_each_agents_and_a_table_can_lift_a_limit() {
        let mut a = Agents::default();
        assert_eq!(a.budget(&client("claude-code", ClientKind::Mcp)), None);
        assert!(!a.any_budget());
        let env = |k: &str| match k {
            "CUBA_EXEC_AGENT_CPU" => Some("1.5".to_string()),
            "CUBA_EXEC_AGENT_PIDS" => Some("256".to_string()),
            "CUBA_EXEC_AGENTS" => {
                Some("codex:cpu=0.5,memory=1G;ci:pids=off;cubactl:memory=2G".to_string())
            }
            _ => None,
        };
        a.apply(&env).expect("valid");
        let b = |name: &str, kind| a.budget(&client(name, kind));
        let each = Budget {
            cpu_millis: Some(1500),
            memory: None,
            pids: Some(256),
        };
        assert_eq!(b("claude-code", ClientKind::Mcp), Some(each));
        let codex = b("codex@laptop", ClientKind::Mcp).expect("a budget");
        assert_eq!(
            (codex.cpu_millis, codex.memory, codex.pids),
            (Some(500), Some(1 << 30), Some(256))
        );
        assert_eq!(b("ci", ClientKind::Mcp).expect("cpu").pids, None);
        // A person's commands have a budget only from their own table.
        assert_eq!(b("other", ClientKind::Cli), None);
        assert_eq!(
            b("cubactl", ClientKind::Cli).expect("own").memory,
            Some(2 << 30)
        );
        let t = a.tightest().expect("budgets");
        assert_eq!(
            (t.cpu_millis, t.memory, t.pids),
            (Some(500), Some(1 << 30), Some(256))
        );
    }
}
