//! The optional settings file, `~/.config/cuba-exec/config.toml` (or `$CUBA_EXEC_CONFIG`).
//! Each key stands for one `CUBA_EXEC_*` variable: the file is read into those variables, which
//! are applied the same way as the environment's, before it, so a variable always wins.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::Deserialize;

/// A number or a string with a unit (`max_procs = 20`, `ttl = "1h"`, `cpu = 1.5`).
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Int(i64),
    Float(f64),
    Text(String),
}

/// `network = true | false | "proxy"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Network {
    Flag(bool),
    Text(String),
}

/// `[proxy]`: the rules of `network = "proxy"`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ProxyTable {
    allow: Option<Vec<String>>,
    deny: Option<Vec<String>>,
    read_only: Option<Vec<String>>,
    unknown: Option<String>,
}

/// `[agents.NAME]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AgentTable {
    client_gone: Option<String>,
    client_gone_grace: Option<Scalar>,
    unwatched_timeout: Option<Scalar>,
    cpu: Option<Scalar>,
    memory: Option<Scalar>,
    pids: Option<Scalar>,
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Int(n) => n.to_string(),
            Scalar::Float(n) => n.to_string(),
            Scalar::Text(t) => t.clone(),
        }
    }
}

/// The file's keys; unknown keys are an error naming the line.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    max_procs: Option<Scalar>,
    buffer_size: Option<Scalar>,
    spool_size: Option<Scalar>,
    ttl: Option<Scalar>,
    max_finished: Option<Scalar>,
    events_keep: Option<Scalar>,
    max_connections: Option<Scalar>,
    idle_timeout: Option<Scalar>,
    orphan_timeout: Option<Scalar>,
    client_gone: Option<String>,
    client_gone_grace: Option<Scalar>,
    unwatched_timeout: Option<Scalar>,
    agent_cpu: Option<Scalar>,
    agent_memory: Option<Scalar>,
    agent_pids: Option<Scalar>,
    /// `[agents.NAME]`: one client's `client_gone`, `client_gone_grace`, `unwatched_timeout`.
    agents: Option<BTreeMap<String, AgentTable>>,
    shutdown_timeout: Option<Scalar>,
    blocked_commands: Option<Vec<String>>,
    allowed_commands: Option<Vec<String>>,
    allowed_dirs: Option<Vec<String>>,
    blocked_side_effects: Option<Vec<String>>,
    ask_commands: Option<Vec<String>>,
    ask_side_effects: Option<Vec<String>>,
    ask_dirs: Option<Vec<String>>,
    approval_timeout: Option<Scalar>,
    notify: Option<String>,
    unresolved: Option<String>,
    exec_checks: Option<String>,
    namespaces: Option<String>,
    audit: Option<bool>,
    sandbox: Option<String>,
    network: Option<Network>,
    proxy: Option<ProxyTable>,
    deny_read: Option<Vec<String>>,
    deny_read_defaults: Option<bool>,
    unix_sockets: Option<Vec<String>>,
    audit_max: Option<Scalar>,
    limits: Option<LimitsTable>,
    cgroups: Option<String>,
    cgroup_parent: Option<String>,
    /// `[hosts.NAME]`, `allowed_hosts` and `host_parallel` are the clients' part of the file
    /// (read by `cuba_protocol::hosts`, which checks them): accepted here, not used.
    #[allow(dead_code)]
    hosts: Option<toml::Table>,
    #[allow(dead_code)]
    allowed_hosts: Option<Vec<String>>,
    #[allow(dead_code)]
    host_parallel: Option<toml::Value>,
    /// The MCP server's reply settings (read by `cuba_protocol::hosts::mcp_settings`).
    #[allow(dead_code)]
    structured: Option<String>,
    #[allow(dead_code)]
    max_output: Option<toml::Value>,
    /// `[http]`: the HTTP endpoint's settings (read and checked by `cuba-exec serve --http`).
    #[allow(dead_code)]
    http: Option<toml::Table>,
}

/// `[limits]`: rlimits and cgroup limits for every command.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LimitsTable {
    cpu_seconds: Option<Scalar>,
    file_size: Option<Scalar>,
    open_files: Option<Scalar>,
    address_space: Option<Scalar>,
    pids_max: Option<Scalar>,
    memory_max: Option<Scalar>,
}

impl File {
    /// The file as the environment variables it stands for.
    fn into_env(self) -> BTreeMap<&'static str, String> {
        let mut vars = BTreeMap::new();
        let limits = self.limits.unwrap_or_default();
        let scalars = [
            ("CUBA_EXEC_AUDIT_MAX", self.audit_max),
            ("CUBA_EXEC_RLIMIT_CPU", limits.cpu_seconds),
            ("CUBA_EXEC_RLIMIT_FSIZE", limits.file_size),
            ("CUBA_EXEC_RLIMIT_NOFILE", limits.open_files),
            ("CUBA_EXEC_RLIMIT_AS", limits.address_space),
            ("CUBA_EXEC_PIDS_MAX", limits.pids_max),
            ("CUBA_EXEC_MEMORY_MAX", limits.memory_max),
            ("CUBA_EXEC_MAX_PROCS", self.max_procs),
            ("CUBA_EXEC_BUFFER_SIZE", self.buffer_size),
            ("CUBA_EXEC_SPOOL_SIZE", self.spool_size),
            ("CUBA_EXEC_TTL", self.ttl),
            ("CUBA_EXEC_MAX_FINISHED", self.max_finished),
            ("CUBA_EXEC_EVENTS_KEEP", self.events_keep),
            ("CUBA_EXEC_MAX_CONNECTIONS", self.max_connections),
            ("CUBA_EXEC_IDLE_TIMEOUT", self.idle_timeout),
            ("CUBA_EXEC_ORPHAN_TIMEOUT", self.orphan_timeout),
            ("CUBA_EXEC_CLIENT_GONE_GRACE", self.client_gone_grace),
            ("CUBA_EXEC_UNWATCHED_TIMEOUT", self.unwatched_timeout),
            ("CUBA_EXEC_AGENT_CPU", self.agent_cpu),
            ("CUBA_EXEC_AGENT_MEMORY", self.agent_memory),
            ("CUBA_EXEC_AGENT_PIDS", self.agent_pids),
            ("CUBA_EXEC_SHUTDOWN_TIMEOUT", self.shutdown_timeout),
            ("CUBA_EXEC_APPROVAL_TIMEOUT", self.approval_timeout),
        ];
        for (name, value) in scalars {
            match value {
                Some(s) => vars.insert(name, s.text()),
                None => None,
            };
        }
        let lists = [
            ("CUBA_EXEC_BLOCKED_COMMANDS", self.blocked_commands),
            ("CUBA_EXEC_ALLOWED_COMMANDS", self.allowed_commands),
            ("CUBA_EXEC_ALLOWED_DIRS", self.allowed_dirs),
            ("CUBA_EXEC_BLOCKED_SIDE_EFFECTS", self.blocked_side_effects),
            ("CUBA_EXEC_ASK_COMMANDS", self.ask_commands),
            ("CUBA_EXEC_ASK_SIDE_EFFECTS", self.ask_side_effects),
            ("CUBA_EXEC_ASK_DIRS", self.ask_dirs),
            ("CUBA_EXEC_DENY_READ", self.deny_read),
            ("CUBA_EXEC_UNIX_SOCKETS", self.unix_sockets),
        ];
        for (name, list) in lists {
            if let Some(list) = list {
                vars.insert(name, list.join(","));
            }
        }
        if let Some(audit) = self.audit {
            vars.insert("CUBA_EXEC_AUDIT", if audit { "1" } else { "0" }.to_string());
        }
        if let Some(v) = self.client_gone {
            vars.insert("CUBA_EXEC_CLIENT_GONE", v);
        }
        if let Some(agents) = self.agents {
            let tables: Vec<String> = agents
                .into_iter()
                .map(|(name, t)| {
                    let keys = [
                        ("client_gone", t.client_gone),
                        ("client_gone_grace", t.client_gone_grace.map(|s| s.text())),
                        ("unwatched_timeout", t.unwatched_timeout.map(|s| s.text())),
                        ("cpu", t.cpu.map(|s| s.text())),
                        ("memory", t.memory.map(|s| s.text())),
                        ("pids", t.pids.map(|s| s.text())),
                    ];
                    let keys: Vec<String> = keys
                        .into_iter()
                        .filter_map(|(k, v)| Some(format!("{k}={}", v?)))
                        .collect();
                    format!("{name}:{}", keys.join(","))
                })
                .collect();
            vars.insert("CUBA_EXEC_AGENTS", tables.join(";"));
        }
        if let Some(v) = self.unresolved {
            vars.insert("CUBA_EXEC_UNRESOLVED", v);
        }
        if let Some(v) = self.exec_checks {
            vars.insert("CUBA_EXEC_EXEC_CHECKS", v);
        }
        if let Some(v) = self.namespaces {
            vars.insert("CUBA_EXEC_NAMESPACES", v);
        }
        if let Some(v) = self.notify {
            vars.insert("CUBA_EXEC_NOTIFY", v);
        }
        if let Some(sandbox) = self.sandbox {
            vars.insert("CUBA_EXEC_SANDBOX", sandbox);
        }
        if let Some(v) = self.cgroups {
            vars.insert("CUBA_EXEC_CGROUPS", v);
        }
        if let Some(v) = self.cgroup_parent {
            vars.insert("CUBA_EXEC_CGROUP_PARENT", v);
        }
        match self.network {
            Some(Network::Flag(on)) => {
                vars.insert("CUBA_EXEC_NETWORK", if on { "1" } else { "0" }.to_string());
            }
            Some(Network::Text(t)) => {
                vars.insert("CUBA_EXEC_NETWORK", t);
            }
            None => {}
        }
        if let Some(v) = self.deny_read_defaults {
            vars.insert("CUBA_EXEC_DENY_READ_DEFAULTS", v.to_string());
        }
        let proxy = self.proxy.unwrap_or_default();
        let rules = [
            ("CUBA_EXEC_PROXY_ALLOW", proxy.allow),
            ("CUBA_EXEC_PROXY_DENY", proxy.deny),
            ("CUBA_EXEC_PROXY_READ_ONLY", proxy.read_only),
        ];
        for (name, list) in rules {
            if let Some(list) = list {
                vars.insert(name, list.join(","));
            }
        }
        if let Some(v) = proxy.unknown {
            vars.insert("CUBA_EXEC_PROXY_UNKNOWN", v);
        }
        vars
    }
}

/// Parses settings text; errors name the line (toml's message carries it).
fn parse(text: &str) -> Result<BTreeMap<&'static str, String>> {
    let file: File = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(file.into_env())
}

/// The settings file, if there is one: its path, and the variables its keys stand for.
pub fn read(
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<Option<(PathBuf, BTreeMap<&'static str, String>)>> {
    let Some((path, explicit)) = cuba_protocol::paths::config_file(lookup) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => return Ok(None),
        Err(e) => bail!("cannot read config file {}: {e}", path.display()),
    };
    let vars = parse(&text).map_err(|e| e.context(format!("config file {}", path.display())))?;
    Ok(Some((path, vars)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::Config;
    use super::*;

    #[test]
    fn the_limits_table_and_audit_max_apply() {
        let vars = parse(
            "audit_max = \"1M\"\n\n[limits]\nopen_files = 64\nfile_size = \"1M\"\n\
             cpu_seconds = 5\naddress_space = \"2G\"\npids_max = 5\nmemory_max = \"256M\"\n",
        )
        .unwrap();
        let c = Config::new("/s".into(), "/d".into())
            .apply_env(|k| vars.get(k).cloned())
            .unwrap();
        assert_eq!(c.audit_max, 1 << 20);
        assert_eq!(c.limits.open_files, Some(64));
        assert_eq!(c.limits.file_size, Some(1 << 20));
        assert_eq!(c.limits.cpu_seconds, Some(5));
        assert_eq!(c.limits.address_space, Some(2 << 30));
        assert_eq!(c.limits.pids_max, Some(5));
        assert_eq!(c.limits.memory_max, Some(256 << 20));
        let err = parse("[limits]\nopen_file = 64\n").unwrap_err();
        assert!(format!("{err:#}").contains("open_file"), "{err:#}");
    }

    #[test]
    fn budgets_are_read_from_the_file_cores_as_a_float_too() {
        let vars = parse(
            "agent_cpu = 1.5\nagent_pids = 256\n\n[agents.codex]\ncpu = 0.5\n\
             memory = \"1G\"\n",
        )
        .unwrap();
        let c = Config::new("/s".into(), "/d".into())
            .apply_env(|k| vars.get(k).cloned())
            .unwrap();
        assert!(c.limits.budgets);
        let client = |name: &str| cuba_protocol::ClientInfo {
            kind: cuba_protocol::ClientKind::Mcp,
            name: name.into(),
            pid: 0,
            cwd: Default::default(),
            env: Default::default(),
        };
        let each = c.agents.budget(&client("other")).unwrap();
        assert_eq!((each.cpu_millis, each.pids), (Some(1500), Some(256)));
        let codex = c.agents.budget(&client("codex")).unwrap();
        assert_eq!(
            (codex.cpu_millis, codex.memory, codex.pids),
            (Some(500), Some(1 << 30), Some(256))
        );
    }

    #[test]
    fn a_bad_file_names_the_line() {
        let err = parse("max_procs = 3\nttl = [1\n").unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        let err = parse("max_procs = 3\n\nbogus = 1\n").unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("line 3") && text.contains("bogus"), "{text}");
    }
}
