//! Where hosts come from: `[hosts.NAME]` tables and `allowed_hosts` in the shared
//! `config.toml` (the daemon reads the rest of that file and checks it), then
//! `CUBA_EXEC_HOSTS` and `CUBA_EXEC_ALLOWED_HOSTS` from the environment, which win.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Bridge, HostSpec, Hosts, LOCAL};
use crate::paths;

/// The clients' part of the file; every other key is the daemon's.
#[derive(Deserialize, Default)]
struct File {
    #[serde(default)]
    hosts: BTreeMap<String, Entry>,
    allowed_hosts: Option<Vec<String>>,
    /// The MCP server's reply settings (`structured`, `max_output`): read by
    /// [`mcp_settings`], not with the hosts.
    #[serde(flatten)]
    mcp: McpFile,
}

/// The MCP server's keys of the file.
#[derive(Deserialize, Default, Clone)]
struct McpFile {
    structured: Option<String>,
    max_output: Option<toml::Value>,
}

/// The MCP server's reply settings, from the environment (`CUBA_EXEC_STRUCTURED`,
/// `CUBA_EXEC_MAX_OUTPUT`) or else the settings file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct McpSettings {
    /// `auto`, `always` or `never`, unchecked (the server knows the words).
    pub structured: Option<String>,
    /// Bytes of output a reply carries by default.
    pub max_output: Option<u64>,
}

/// [`McpSettings`] through `lookup`; errors name the setting and its value.
pub fn mcp_settings(lookup: &impl Fn(&str) -> Option<String>) -> Result<McpSettings, String> {
    let mut file = McpFile::default();
    if let Some((path, _)) = paths::config_file(lookup) {
        if let Ok(text) = std::fs::read_to_string(&path) {
            let parsed: File = toml::from_str(&text)
                .map_err(|e| format!("config file {}: {e}", path.display()))?;
            file = parsed.mcp;
        }
    }
    let structured = lookup("CUBA_EXEC_STRUCTURED").or(file.structured);
    let max_output = match lookup("CUBA_EXEC_MAX_OUTPUT") {
        Some(v) => Some(size(&v).map_err(|e| format!("CUBA_EXEC_MAX_OUTPUT: {e}"))?),
        None => match file.max_output {
            Some(toml::Value::Integer(n)) => {
                Some(u64::try_from(n).map_err(|_| format!("max_output: {n} is negative"))?)
            }
            Some(toml::Value::String(s)) => Some(size(&s).map_err(|e| format!("max_output: {e}"))?),
            Some(other) => return Err(format!("max_output: {other} is not a size")),
            None => None,
        },
    };
    Ok(McpSettings {
        structured,
        max_output,
    })
}

/// `16384`, `16K`, `1M`: a number of bytes.
pub fn size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1024),
        None => match t.strip_suffix(['M', 'm']) {
            Some(d) => (d, 1024 * 1024),
            None => (t, 1),
        },
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{text:?} is not a size (bytes, or a number with K or M)"))
}

/// `[hosts.NAME]`: unknown keys are an error naming the line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    ssh: Option<String>,
    #[serde(default)]
    ssh_options: Vec<String>,
    command: Option<Vec<String>>,
    remote_bin: Option<String>,
    cwd: Option<String>,
}

/// A host name: letters, digits, `.`, `_`, `-`; not `local` (this machine) or `*` (every host).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a host name is empty".into());
    }
    if name == LOCAL {
        return Err(format!(
            "`{LOCAL}` is this machine's name and cannot name another host"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "host name {name:?} has {c:?}; use letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

impl Entry {
    fn into_spec(self, name: &str) -> Result<HostSpec, String> {
        check_name(name)?;
        let bridge = match (self.ssh, self.command) {
            (Some(dest), None) => {
                if dest.trim().is_empty() || dest.starts_with('-') {
                    return Err(format!(
                        "[hosts.{name}] ssh = {dest:?} is not an ssh destination (`user@host` \
                         or a Host of ~/.ssh/config)"
                    ));
                }
                Bridge::Ssh {
                    dest,
                    options: self.ssh_options,
                }
            }
            (None, Some(command)) => {
                if command.first().is_none_or(|p| p.is_empty()) {
                    return Err(format!(
                        "[hosts.{name}] command is empty; give the program and its arguments, \
                         e.g. [\"docker\", \"exec\", \"-i\", \"dev\", \"cubactl\", \"bridge\"]"
                    ));
                }
                if self.remote_bin.is_some() || !self.ssh_options.is_empty() {
                    return Err(format!(
                        "[hosts.{name}] remote_bin and ssh_options apply to `ssh` hosts; a \
                         `command` names its whole bridge"
                    ));
                }
                Bridge::Command(command)
            }
            (Some(_), Some(_)) => {
                return Err(format!(
                    "[hosts.{name}] has both `ssh` and `command`; give one"
                ))
            }
            (None, None) => {
                return Err(format!(
                    "[hosts.{name}] needs `ssh = \"user@host\"` or `command = [..]`"
                ))
            }
        };
        if let Some(cwd) = &self.cwd {
            if !(cwd.starts_with('/') || cwd.starts_with('~')) {
                return Err(format!(
                    "[hosts.{name}] cwd = {cwd:?} must be an absolute path on that host"
                ));
            }
        }
        Ok(HostSpec {
            name: name.to_string(),
            bridge,
            remote_bin: self.remote_bin,
            cwd: self.cwd,
        })
    }
}

/// Hosts of `CUBA_EXEC_HOSTS`: `NAME=ssh:DEST` or `NAME=command:PROGRAM ARG…` (words split on
/// spaces), separated by commas.
fn from_env(value: &str) -> Result<Vec<HostSpec>, String> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let bad = || {
            format!(
                "CUBA_EXEC_HOSTS: {item:?} is not NAME=ssh:DEST or NAME=command:PROGRAM ARGS \
                 (e.g. build=ssh:me@build)"
            )
        };
        let (name, how) = item.split_once('=').ok_or_else(bad)?;
        let entry = if let Some(dest) = how.strip_prefix("ssh:") {
            Entry {
                ssh: Some(dest.trim().to_string()),
                ssh_options: Vec::new(),
                command: None,
                remote_bin: None,
                cwd: None,
            }
        } else if let Some(command) = how.strip_prefix("command:") {
            Entry {
                ssh: None,
                ssh_options: Vec::new(),
                command: Some(command.split_whitespace().map(String::from).collect()),
                remote_bin: None,
                cwd: None,
            }
        } else {
            return Err(bad());
        };
        out.push(
            entry
                .into_spec(name.trim())
                .map_err(|e| format!("CUBA_EXEC_HOSTS: {e}"))?,
        );
    }
    Ok(out)
}

fn names(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect()
}

/// Parses the clients' part of settings text; errors name the line.
fn parse(text: &str) -> Result<(Vec<HostSpec>, Option<Vec<String>>), String> {
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut hosts = Vec::new();
    for (name, entry) in file.hosts {
        hosts.push(entry.into_spec(&name)?);
    }
    Ok((hosts, file.allowed_hosts))
}

/// The hosts configured for this client: the settings file's, then the environment's (a name
/// in both takes the environment's). `lookup` reads a variable.
pub fn load(lookup: &impl Fn(&str) -> Option<String>) -> Result<Hosts, String> {
    let mut hosts = Hosts::default();
    if let Some((path, explicit)) = paths::config_file(lookup) {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let (specs, allowed) =
                    parse(&text).map_err(|e| format!("config file {}: {e}", path.display()))?;
                hosts.config = Some(path);
                hosts.allowed = allowed;
                for spec in specs {
                    hosts.insert(spec);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {}
            Err(e) => return Err(format!("cannot read config file {}: {e}", path.display())),
        }
    }
    if let Some(value) = lookup("CUBA_EXEC_HOSTS") {
        for spec in from_env(&value)? {
            hosts.insert(spec);
        }
    }
    if let Some(value) = lookup("CUBA_EXEC_ALLOWED_HOSTS") {
        hosts.allowed = Some(names(&value));
    }
    Ok(hosts)
}

/// [`load`] from this process's environment.
pub fn load_env() -> Result<Hosts, String> {
    load(&|k| std::env::var(k).ok())
}

/// Where a host could be added, for error messages.
pub fn config_hint(hosts: &Hosts) -> String {
    let path = hosts
        .config
        .clone()
        .or_else(|| paths::config_file(&|k| std::env::var(k).ok()).map(|(p, _)| p));
    match path {
        Some(p) => format!("add [hosts.NAME] to {} or set CUBA_EXEC_HOSTS", p.display()),
        None => "add [hosts.NAME] to config.toml or set CUBA_EXEC_HOSTS".into(),
    }
}
