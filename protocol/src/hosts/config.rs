//! Where hosts come from: `[hosts.NAME]` tables and `allowed_hosts` in the shared
//! `config.toml` (the daemon reads the rest of that file and checks it), then
//! `CUBA_EXEC_HOSTS` and `CUBA_EXEC_ALLOWED_HOSTS` from the environment, which win.

use std::collections::BTreeMap;

use serde::Deserialize;

use std::time::Duration;

use super::{Bridge, Container, HostSpec, Hosts, Pod, LOCAL, POD_KEEPALIVE};
use crate::paths;

/// The clients' part of the file; every other key is the daemon's.
#[derive(Deserialize, Default)]
struct File {
    #[serde(default)]
    hosts: BTreeMap<String, Entry>,
    allowed_hosts: Option<Vec<String>>,
    host_parallel: Option<usize>,
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
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Entry {
    ssh: Option<String>,
    #[serde(default)]
    ssh_options: Vec<String>,
    command: Option<Vec<String>>,
    /// A container by name or id; with `image`, the name of the one made from it.
    container: Option<String>,
    image: Option<String>,
    engine: Option<String>,
    #[serde(default)]
    run_options: Vec<String>,
    user: Option<String>,
    pod: Option<String>,
    namespace: Option<String>,
    context: Option<String>,
    pod_container: Option<String>,
    /// Seconds a link may be idle before a request keeps it open (0: never).
    keepalive: Option<u64>,
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
    /// Which kind of host the keys describe: exactly one of `ssh`, `command`, `container` /
    /// `image`, `pod`.
    fn kind(&self, name: &str) -> Result<&'static str, String> {
        let kinds: Vec<&'static str> = [
            ("ssh", self.ssh.is_some()),
            ("command", self.command.is_some()),
            (
                "container",
                self.container.is_some() || self.image.is_some(),
            ),
            ("pod", self.pod.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        match kinds.as_slice() {
            [one] => Ok(one),
            [] => Err(format!(
                "[hosts.{name}] needs one of `ssh = \"user@host\"`, `container = \"NAME\"` (or \
                 `image = \"IMAGE\"`), `pod = \"POD\"` or `command = [..]`"
            )),
            many => Err(format!(
                "[hosts.{name}] has {}; give one",
                many.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            )),
        }
    }

    /// Keys given that a host of `kind` does not use: an error naming them.
    fn unused(&self, name: &str, kind: &str) -> Result<(), String> {
        let mut extra: Vec<&str> = Vec::new();
        let mut check = |key: &'static str, set: bool, used_by: &[&str]| {
            if set && !used_by.contains(&kind) {
                extra.push(key);
            }
        };
        check("ssh_options", !self.ssh_options.is_empty(), &["ssh"]);
        check("engine", self.engine.is_some(), &["container"]);
        check("run_options", !self.run_options.is_empty(), &["container"]);
        check("user", self.user.is_some(), &["container"]);
        check("namespace", self.namespace.is_some(), &["pod"]);
        check("context", self.context.is_some(), &["pod"]);
        check("pod_container", self.pod_container.is_some(), &["pod"]);
        check(
            "remote_bin",
            self.remote_bin.is_some(),
            &["ssh", "container", "pod"],
        );
        match extra.as_slice() {
            [] => Ok(()),
            _ if kind == "command" => Err(format!(
                "[hosts.{name}] {} do not apply to a `command` host: a command names its whole \
                 bridge",
                extra.join(", ")
            )),
            _ => Err(format!(
                "[hosts.{name}] {} do not apply to a `{kind}` host",
                extra.join(", ")
            )),
        }
    }

    fn into_spec(self, name: &str) -> Result<HostSpec, String> {
        check_name(name)?;
        let kind = self.kind(name)?;
        self.unused(name, kind)?;
        let nonempty = |key: &str, value: &Option<String>| match value {
            Some(v) if v.trim().is_empty() || v.starts_with('-') => Err(format!(
                "[hosts.{name}] {key} = {v:?} is not a name (empty, or an option)"
            )),
            _ => Ok(()),
        };
        let mut keepalive = self.keepalive.map(Duration::from_secs);
        let bridge = match kind {
            "ssh" => {
                let dest = self.ssh.unwrap_or_default();
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
            "command" => {
                let command = self.command.unwrap_or_default();
                if command.first().is_none_or(|p| p.is_empty()) {
                    return Err(format!(
                        "[hosts.{name}] command is empty; give the program and its arguments, \
                         e.g. [\"docker\", \"exec\", \"-i\", \"dev\", \"cubactl\", \"bridge\"]"
                    ));
                }
                Bridge::Command(command)
            }
            "container" => {
                nonempty("container", &self.container)?;
                nonempty("image", &self.image)?;
                nonempty("user", &self.user)?;
                if let Some(engine) = &self.engine {
                    if engine.trim().is_empty() {
                        return Err(format!(
                            "[hosts.{name}] engine is empty; give `podman` or `docker`"
                        ));
                    }
                }
                // A container made from an image is named after the host unless named.
                let container = self
                    .container
                    .unwrap_or_else(|| format!("cuba-exec-{name}"));
                if !self.run_options.is_empty() && self.image.is_none() {
                    return Err(format!(
                        "[hosts.{name}] run_options apply to a container made from `image`"
                    ));
                }
                Bridge::Container(Container {
                    engine: self.engine,
                    name: container,
                    image: self.image,
                    run_options: self.run_options,
                    user: self.user,
                })
            }
            _ => {
                nonempty("pod", &self.pod)?;
                nonempty("namespace", &self.namespace)?;
                nonempty("context", &self.context)?;
                nonempty("pod_container", &self.pod_container)?;
                keepalive = keepalive.or(Some(POD_KEEPALIVE));
                Bridge::Pod(Pod {
                    pod: self.pod.unwrap_or_default(),
                    namespace: self.namespace,
                    context: self.context,
                    container: self.pod_container,
                })
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
            keepalive: keepalive.filter(|d| !d.is_zero()),
        })
    }
}

/// Hosts of `CUBA_EXEC_HOSTS`, separated by commas: `NAME=ssh:DEST`, `NAME=podman:CONTAINER`,
/// `NAME=docker:CONTAINER`, `NAME=image:IMAGE` (a container made from it), `NAME=pod:[NS/]POD`
/// or `NAME=command:PROGRAM ARG…` (words split on spaces).
fn from_env(value: &str) -> Result<Vec<HostSpec>, String> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let bad = || {
            format!(
                "CUBA_EXEC_HOSTS: {item:?} is not NAME=ssh:DEST, NAME=podman:CONTAINER, \
                 NAME=docker:CONTAINER, NAME=image:IMAGE, NAME=pod:[NS/]POD or \
                 NAME=command:PROGRAM ARGS (e.g. build=ssh:me@build)"
            )
        };
        let (name, how) = item.split_once('=').ok_or_else(bad)?;
        let (kind, what) = how.split_once(':').ok_or_else(bad)?;
        let what = what.trim().to_string();
        let entry = match kind {
            "ssh" => Entry {
                ssh: Some(what),
                ..Entry::default()
            },
            "podman" | "docker" => Entry {
                container: Some(what),
                engine: Some(kind.to_string()),
                ..Entry::default()
            },
            "image" => Entry {
                image: Some(what),
                ..Entry::default()
            },
            "pod" => {
                let (namespace, pod) = match what.split_once('/') {
                    Some((ns, pod)) => (Some(ns.to_string()), pod.to_string()),
                    None => (None, what),
                };
                Entry {
                    pod: Some(pod),
                    namespace,
                    ..Entry::default()
                }
            }
            "command" => Entry {
                command: Some(what.split_whitespace().map(String::from).collect()),
                ..Entry::default()
            },
            _ => return Err(bad()),
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
fn parse(text: &str) -> Result<Parsed, String> {
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut hosts = Vec::new();
    for (name, entry) in file.hosts {
        hosts.push(entry.into_spec(&name)?);
    }
    if file.host_parallel == Some(0) {
        return Err("host_parallel = 0: at least one host must be reached at a time".into());
    }
    Ok(Parsed {
        hosts,
        allowed: file.allowed_hosts,
        parallel: file.host_parallel,
    })
}

/// The clients' part of a settings file.
struct Parsed {
    hosts: Vec<HostSpec>,
    allowed: Option<Vec<String>>,
    parallel: Option<usize>,
}

/// The hosts configured for this client: the settings file's, then the environment's (a name
/// in both takes the environment's). `lookup` reads a variable.
pub fn load(lookup: &impl Fn(&str) -> Option<String>) -> Result<Hosts, String> {
    let mut hosts = Hosts::default();
    if let Some((path, explicit)) = paths::config_file(lookup) {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let parsed =
                    parse(&text).map_err(|e| format!("config file {}: {e}", path.display()))?;
                hosts.config = Some(path);
                hosts.allowed = parsed.allowed;
                hosts.parallel = parsed.parallel;
                for spec in parsed.hosts {
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
    if let Some(value) = lookup("CUBA_EXEC_HOST_PARALLEL") {
        match value.trim().parse::<usize>() {
            Ok(n) if n > 0 => hosts.parallel = Some(n),
            _ => {
                return Err(format!(
                    "CUBA_EXEC_HOST_PARALLEL={value:?} is not a number of hosts (1 or more)"
                ))
            }
        }
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
