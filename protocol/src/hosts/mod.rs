//! Other machines: each runs its own `cubad`, reached through a bridge command whose stdio
//! carries the unchanged protocol — `ssh -T DEST cubactl bridge` by default, or any command
//! (`docker exec -i …`, `kubectl exec -i …`). Nothing new listens on a network.
//!
//! - `config.rs`: `[hosts.NAME]` in `config.toml`, `CUBA_EXEC_HOSTS`, `CUBA_EXEC_ALLOWED_HOSTS`.
//! - `bridge.rs`: starting a bridge and the handshake through it, with errors that say what to do.
//! - `pool.rs`: one connection per host, made on first use, kept, remade after a drop.

mod bridge;
mod config;
mod pool;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use bridge::{hostname, NARROWING};
pub use config::{check_name, config_hint, load, load_env, mcp_settings, size, McpSettings};
pub use pool::{is_local, Pool};

/// The name of this machine in `host` arguments and listings.
pub const LOCAL: &str = "local";
/// The `host` that means every host (in listings).
pub const ALL: &str = "*";

/// How a host is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bridge {
    /// `ssh -T -o BatchMode=yes OPTIONS… DEST REMOTE_BIN bridge`: the user's keys, agent,
    /// `~/.ssh/config`, ProxyJump and ControlMaster apply.
    Ssh { dest: String, options: Vec<String> },
    /// A command whose stdio reaches the remote daemon (it runs `cubactl bridge` there).
    Command(Vec<String>),
}

/// One configured host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    pub bridge: Bridge,
    /// `cubactl` on the host, as its shell finds it (default `cubactl` on its `PATH`).
    pub remote_bin: Option<String>,
    /// The default working directory there (default: the remote user's home).
    pub cwd: Option<String>,
}

impl HostSpec {
    /// The bridge's program and arguments.
    pub fn argv(&self) -> Vec<String> {
        match &self.bridge {
            Bridge::Ssh { dest, options } => {
                let mut argv = vec!["ssh".to_string()];
                // The user's options first: for ssh the first value of an option wins.
                argv.extend(options.iter().cloned());
                for o in [
                    "BatchMode=yes",
                    "ServerAliveInterval=15",
                    "ServerAliveCountMax=3",
                    "ConnectTimeout=10",
                ] {
                    argv.extend(["-o".to_string(), o.to_string()]);
                }
                argv.extend(["-T".to_string(), "--".to_string(), dest.clone()]);
                argv.push(self.remote_bin.clone().unwrap_or_else(|| "cubactl".into()));
                argv.push("bridge".into());
                argv
            }
            Bridge::Command(argv) => argv.clone(),
        }
    }

    /// How the host is reached, in a few words (`ssh me@build`, `docker exec -i dev …`).
    pub fn via(&self) -> String {
        match &self.bridge {
            Bridge::Ssh { dest, .. } => format!("ssh {dest}"),
            Bridge::Command(argv) => argv.join(" "),
        }
    }
}

/// The hosts a client may use.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    specs: BTreeMap<String, HostSpec>,
    /// `allowed_hosts` / `CUBA_EXEC_ALLOWED_HOSTS`: only these may be used (`None`: all).
    allowed: Option<Vec<String>>,
    /// The settings file they came from, if any.
    config: Option<PathBuf>,
}

impl Hosts {
    pub fn insert(&mut self, spec: HostSpec) {
        self.specs.insert(spec.name.clone(), spec);
    }

    /// Every configured host, by name.
    pub fn all(&self) -> impl Iterator<Item = &HostSpec> {
        self.specs.values()
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Only those of `names` that policy already allows may be used (a token scoped to
    /// hosts: it can narrow the list, never widen it).
    pub fn narrow(&mut self, names: &[String]) {
        let kept: Vec<String> = names.iter().filter(|n| self.allowed(n)).cloned().collect();
        self.allowed = Some(kept);
    }

    /// Whether policy lets this client use host `name` (this machine is always allowed).
    pub fn allowed(&self, name: &str) -> bool {
        name == LOCAL
            || self
                .allowed
                .as_ref()
                .is_none_or(|list| list.iter().any(|n| n == name))
    }

    /// Host `name`, or why it cannot be used: unknown (listing the known ones) or not allowed.
    pub fn get(&self, name: &str) -> Result<&HostSpec, String> {
        let Some(spec) = self.specs.get(name) else {
            let known: Vec<&str> = self.specs.keys().map(String::as_str).collect();
            let known = match known.is_empty() {
                true => "none is configured".to_string(),
                false => format!("configured: {}", known.join(", ")),
            };
            return Err(format!(
                "unknown host {name:?} ({known}; `{LOCAL}` is this machine); {}",
                config_hint(self)
            ));
        };
        if !self.allowed(name) {
            return Err(format!(
                "host {name:?} is not allowed by policy (allowed_hosts / \
                 CUBA_EXEC_ALLOWED_HOSTS: {})",
                self.allowed.as_deref().unwrap_or_default().join(", ")
            ));
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests;
