//! Other machines: each runs its own `cubad`, reached through a bridge command whose stdio
//! carries the unchanged protocol — `ssh -T DEST cubactl bridge`, `podman exec -i CONTAINER
//! cubactl bridge`, `kubectl exec -i POD -- cubactl bridge`, or any command. Nothing new
//! listens on a network.
//!
//! - `config.rs`: `[hosts.NAME]` in `config.toml`, `CUBA_EXEC_HOSTS`, `CUBA_EXEC_ALLOWED_HOSTS`.
//! - `bridge.rs`: starting a bridge and the handshake through it, with errors that say what to do.
//! - `container.rs`: a container host made ready (created, started, `cubactl` put inside).
//! - `group.rs`: host groups (`web*`, `a,b`) and how many are reached at once.
//! - `pool.rs`: one connection per host, made on first use, kept, remade after a drop.

mod bridge;
mod config;
mod container;
mod group;
mod pool;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub use bridge::{hostname, NARROWING};
pub use config::{check_name, config_hint, load, load_env, mcp_settings, size, McpSettings};
pub use container::COPY_DIR;
pub use group::{is_group, DEFAULT_PARALLEL};
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
    /// `ENGINE exec -i CONTAINER cubactl bridge`, the container made ready first.
    Container(Container),
    /// `kubectl exec -i POD -- cubactl bridge`.
    Pod(Pod),
}

/// A podman or docker container as a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// `podman`, `docker` or a path to either; `None`: podman when it is on `PATH`, else docker.
    pub engine: Option<String>,
    /// The container's name or id.
    pub name: String,
    /// Started from this image when the container does not exist (and started again when it
    /// has stopped, on a client's first connection).
    pub image: Option<String>,
    /// More arguments of `ENGINE run` (volumes, network), for a container made from `image`.
    pub run_options: Vec<String>,
    /// `exec -u USER`: who the daemon there runs as (default: the container's user).
    pub user: Option<String>,
}

/// A Kubernetes pod as a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub pod: String,
    pub namespace: Option<String>,
    /// `kubectl --context`.
    pub context: Option<String>,
    /// The container of the pod (`kubectl exec -c`).
    pub container: Option<String>,
}

/// How long a pod's link may sit idle before a request keeps it open: the kubelet ends an
/// exec stream idle for `streamingConnectionIdleTimeout` (4 h by default, often set lower).
pub const POD_KEEPALIVE: Duration = Duration::from_secs(60);

/// One configured host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    pub bridge: Bridge,
    /// `cubactl` on the host, as its shell finds it (default `cubactl` on its `PATH`).
    pub remote_bin: Option<String>,
    /// The default working directory there (default: the remote user's home).
    pub cwd: Option<String>,
    /// A request sent on a link idle this long keeps it open (`None`: none is sent).
    pub keepalive: Option<Duration>,
}

impl HostSpec {
    /// The bridge's program and arguments; a container's run `bin` there (what
    /// `container::prepare` found or put in).
    pub fn argv(&self, bin: Option<&str>) -> Vec<String> {
        let bin = bin
            .or(self.remote_bin.as_deref())
            .unwrap_or("cubactl")
            .to_string();
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
                argv.extend([bin, "bridge".into()]);
                argv
            }
            Bridge::Command(argv) => argv.clone(),
            Bridge::Container(c) => {
                let mut argv = vec![c.engine(), "exec".into(), "-i".into()];
                if let Some(user) = &c.user {
                    argv.extend(["-u".into(), user.clone()]);
                }
                argv.extend([c.name.clone(), bin, "bridge".into()]);
                argv
            }
            Bridge::Pod(p) => {
                let mut argv = vec!["kubectl".to_string()];
                if let Some(context) = &p.context {
                    argv.extend(["--context".into(), context.clone()]);
                }
                if let Some(ns) = &p.namespace {
                    argv.extend(["-n".into(), ns.clone()]);
                }
                argv.extend(["exec".into(), "-i".into(), p.pod.clone()]);
                if let Some(container) = &p.container {
                    argv.extend(["-c".into(), container.clone()]);
                }
                argv.extend(["--".into(), bin, "bridge".into()]);
                argv
            }
        }
    }

    /// How the host is reached, in a few words (`ssh me@build`, `docker exec -i dev …`).
    pub fn via(&self) -> String {
        match &self.bridge {
            Bridge::Ssh { dest, .. } => format!("ssh {dest}"),
            Bridge::Command(argv) => argv.join(" "),
            Bridge::Container(c) => match &c.image {
                Some(image) => format!("{} container {} (image {image})", c.engine(), c.name),
                None => format!("{} container {}", c.engine(), c.name),
            },
            Bridge::Pod(p) => match &p.namespace {
                Some(ns) => format!("kubectl pod {ns}/{}", p.pod),
                None => format!("kubectl pod {}", p.pod),
            },
        }
    }
}

impl Container {
    /// The engine's program: the one configured, else podman when it is on `PATH`, else docker.
    pub fn engine(&self) -> String {
        if let Some(e) = &self.engine {
            return e.clone();
        }
        static FOUND: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
        FOUND
            .get_or_init(|| match crate::paths::on_path("podman") {
                true => "podman",
                false => "docker",
            })
            .to_string()
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
    /// How many hosts of a group are reached at once (`host_parallel`).
    parallel: Option<usize>,
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

    /// Why the link to host `name` dropped, when the host can say: a container that is no
    /// longer running.
    pub async fn why_dropped(&self, name: &str) -> Option<String> {
        match &self.specs.get(name)?.bridge {
            Bridge::Container(c) => container::stopped(c).await,
            _ => None,
        }
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
