//! Daemon settings: defaults from the design, then the config file (`file.rs`), then
//! `CUBA_EXEC_*` environment variables (`env.rs`), which always win.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::base::policy::Policy;

mod agents;
mod env;
mod file;
mod limits;
mod sandbox;
mod units;

pub use agents::{Agents, OnGone, Rules as AgentRules};
pub use limits::{CgroupMode, Limits, Rlimit};
pub use sandbox::{ProxyRules, Sandbox};
pub use units::{parse_duration, parse_size, shown as shown_duration};

#[derive(Debug, Clone)]
pub struct Config {
    /// The program this daemon runs from: what `Upgrade` hands over to unless told otherwise.
    pub exe: PathBuf,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    /// Most processes running at once; the next spawn gets a `LIMIT` error.
    pub max_procs: usize,
    /// In-memory head+tail buffer per process.
    pub buffer_size: usize,
    /// On-disk spool cap per process.
    pub spool_cap: u64,
    /// How long finished records are kept.
    pub ttl: Duration,
    /// Most finished records kept; beyond it the oldest are pruned before their `ttl`.
    pub max_finished: usize,
    /// Events the event log keeps (the oldest go first; a reader further behind is told how
    /// many it lost).
    pub events_keep: usize,
    /// Most client connections at once; the next is refused at the handshake.
    pub max_connections: usize,
    /// A connection with no request in flight for this long is closed (clients reconnect).
    pub idle_timeout: Duration,
    /// TERM → KILL grace period when stopping a tree.
    pub grace: Duration,
    /// A command an MCP client started that waits for input this long after the client has
    /// gone, with nobody following it, is stopped; `None` keeps it (`orphan_timeout = 0`).
    pub orphan_timeout: Option<Duration>,
    /// What becomes of an agent's commands when its client goes, or nobody attends to them.
    pub agents: Agents,
    /// Shell that runs commands as `shell -c TEXT`.
    pub shell: String,
    /// What may run, and where.
    pub policy: Policy,
    /// Copy every audit line to stderr too (`CUBA_EXEC_AUDIT=1`).
    pub audit_stderr: bool,
    /// `audit.jsonl` is rotated (`.1` … `.3`) once it grows past this many bytes
    /// (`CUBA_EXEC_AUDIT_MAX`, default 8 MiB).
    pub audit_max: u64,
    /// rlimits and cgroup limits for every command (none by default).
    pub limits: Limits,
    /// The OS sandbox every command runs in (off by default).
    pub sandbox: Sandbox,
    /// The person's masks as listed (`deny_read`), made absolute into `sandbox` at the load.
    pub deny_read: Vec<String>,
    /// Whether the default masks apply (`deny_read_defaults`, true by default).
    pub deny_read_defaults: bool,
    /// Side-effect categories a spawn may not declare (`CUBA_EXEC_BLOCKED_SIDE_EFFECTS`).
    pub blocked_side_effects: BTreeSet<String>,
    /// Every exec in a command's tree checked by the daemon (`exec_checks`).
    pub exec_checks: ExecChecks,
    /// Whether a checked tree may make namespaces and change mounts (`namespaces = "allow"`);
    /// by default it may not, so every exec is judged in the daemon's view of the files.
    pub allow_namespaces: bool,
    /// How long a question put to the person waits before it is denied (`approval_timeout`).
    pub approval_timeout: Duration,
    /// How the person is told of a question (`notify`).
    pub notify: Notify,
    /// Remembered approvals (`approvals.toml`).
    pub approvals_file: PathBuf,
    /// The HTTP endpoint's bearer tokens (`tokens.toml`, hashes only).
    pub tokens_file: PathBuf,
    /// The settings file's values as this daemon read them (by the variable each key stands
    /// for; empty without a file): a later edit is compared with these.
    pub file_settings: std::collections::BTreeMap<&'static str, String>,
}

/// `notify = "auto" | "off" | PROGRAM` (`CUBA_EXEC_NOTIFY`): a desktop notification for every
/// question put to the person. `auto`: `notify-send` where it is installed (Linux), `osascript`
/// (macOS); a program is run as `PROGRAM TITLE BODY`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Notify {
    #[default]
    Auto,
    Off,
    Program(PathBuf),
}

impl Notify {
    pub fn parse(text: &str) -> Notify {
        match text.trim() {
            t if t.eq_ignore_ascii_case("auto") => Notify::Auto,
            t if ["off", "0", "false", "no"].contains(&t.to_ascii_lowercase().as_str()) => {
                Notify::Off
            }
            t => Notify::Program(PathBuf::from(t)),
        }
    }
}

/// `exec_checks = "auto" | "on" | "off"` (`CUBA_EXEC_EXEC_CHECKS`): where the kernel can,
/// every exec is checked (`auto`, the default); `on` refuses to start a command where it
/// cannot; `off` leaves the parse-time check alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecChecks {
    #[default]
    Auto,
    On,
    Off,
}

impl ExecChecks {
    pub fn parse(text: &str) -> Result<ExecChecks, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(ExecChecks::Auto),
            "on" | "1" | "true" => Ok(ExecChecks::On),
            "off" | "0" | "false" => Ok(ExecChecks::Off),
            other => Err(format!("{other:?}: expected auto, on or off")),
        }
    }
}

impl Config {
    pub fn new(socket: PathBuf, state_dir: PathBuf) -> Config {
        Config {
            exe: std::env::current_exe().unwrap_or_default(),
            socket,
            state_dir,
            max_procs: 20,
            buffer_size: 64 * 1024,
            spool_cap: 64 * 1024 * 1024,
            ttl: Duration::from_secs(3600),
            max_finished: 1000,
            events_keep: 4096,
            max_connections: 512,
            idle_timeout: Duration::from_secs(600),
            grace: Duration::from_secs(5),
            orphan_timeout: Some(Duration::from_secs(30 * 60)),
            agents: Agents::default(),
            // On Windows the daemon sets its own default before loading (`windows::default_shell`).
            shell: "/bin/sh".to_string(),
            policy: Policy::default(),
            audit_stderr: false,
            audit_max: 8 * 1024 * 1024,
            limits: Limits::default(),
            sandbox: Sandbox::default(),
            deny_read: Vec::new(),
            deny_read_defaults: true,
            blocked_side_effects: crate::base::side_effects::default_blocked(),
            exec_checks: ExecChecks::default(),
            allow_namespaces: false,
            approval_timeout: Duration::from_secs(600),
            notify: Notify::default(),
            approvals_file: PathBuf::from("approvals.toml"),
            tokens_file: PathBuf::from("tokens.toml"),
            file_settings: Default::default(),
        }
    }

    /// The settings file (see `file.rs`), then the environment `lookup`.
    pub fn load(self, lookup: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let read = file::read(&lookup)?;
        let from_file = match &read {
            Some((path, vars)) => self
                .apply_env(|k| vars.get(k).cloned())
                .with_context(|| format!("config file {}", path.display()))?,
            None => self,
        };
        let mut config = from_file.apply_env(&lookup)?;
        let state = config.state_dir.clone();
        config.approvals_file =
            beside_settings(&lookup, "CUBA_EXEC_APPROVALS", "approvals.toml", &state);
        config.tokens_file = beside_settings(&lookup, "CUBA_EXEC_TOKENS", "tokens.toml", &state);
        let home = lookup("HOME")
            .filter(|h| h.starts_with('/'))
            .map(PathBuf::from);
        // cuba-exec's own: the settings, the state (spools, journal, audit), approvals, tokens.
        let mut own = vec![
            state,
            config.approvals_file.clone(),
            config.tokens_file.clone(),
        ];
        // The settings' directory where it is cuba-exec's own; a file named elsewhere alone.
        match cuba_protocol::paths::config_file(&lookup) {
            Some((file, true)) => own.push(file),
            Some((file, false)) => own.extend(file.parent().map(Path::to_path_buf)),
            None => {}
        }
        let listed = config.deny_read.clone();
        config
            .sandbox
            .set_masks(&listed, config.deny_read_defaults, home.as_deref(), &own)
            .map_err(|e| anyhow::anyhow!("deny_read (CUBA_EXEC_DENY_READ): {e}"))?;
        config.file_settings = read.map(|(_, vars)| vars).unwrap_or_default();
        Ok(config)
    }

    /// How the settings file now differs from what this daemon read at its start, one line
    /// per setting (by the variable it stands for); a file that no longer reads is one line
    /// saying why. `lookup` is the daemon's environment, whose variables win over the file.
    pub fn file_changes(&self, lookup: impl Fn(&str) -> Option<String>) -> Vec<String> {
        let now = match file::read(&lookup) {
            Ok(read) => read.map(|(_, vars)| vars).unwrap_or_default(),
            Err(e) => return vec![format!("the settings file does not read: {e:#}")],
        };
        let shown = |v: Option<&String>| match v {
            None => "(unset)".to_string(),
            Some(v) if v.chars().count() > 60 => {
                format!("{}…", v.chars().take(60).collect::<String>())
            }
            Some(v) => format!("{v:?}"),
        };
        let keys: BTreeSet<&&str> = self.file_settings.keys().chain(now.keys()).collect();
        keys.into_iter()
            .filter(|k| self.file_settings.get(**k) != now.get(**k))
            .map(|k| {
                let wins = match lookup(k) {
                    Some(_) => " (the environment's value wins)",
                    None => "",
                };
                format!(
                    "settings: {k} {} → {}{wins}",
                    shown(self.file_settings.get(*k)),
                    shown(now.get(*k))
                )
            })
            .collect()
    }
}

/// A file of the person's: `$VAR`, else `name` beside the settings file where that is a file
/// of its own (`$CUBA_EXEC_CONFIG=/dev/null` has no "beside"), else in the usual settings
/// directory (`~/.config/cuba-exec/`), else — no home to find it by — in the state directory
/// `state`: never the working directory, where a file of credentials would land wherever the
/// daemon was started.
fn beside_settings(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &str,
    name: &str,
    state: &Path,
) -> PathBuf {
    if let Some(p) = lookup(var).filter(|p| !p.trim().is_empty()) {
        return PathBuf::from(p);
    }
    let beside = cuba_protocol::paths::config_file(lookup)
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "toml"));
    if let Some(dir) = beside.as_deref().and_then(|p| p.parent()) {
        return dir.join(name);
    }
    let no_config = |k: &str| match k {
        "CUBA_EXEC_CONFIG" => None,
        other => lookup(other),
    };
    let default = cuba_protocol::paths::config_file(&no_config).map(|(p, _)| p);
    match default.as_deref().and_then(|p| p.parent()) {
        Some(dir) if dir.is_absolute() => dir.join(name),
        _ => state.join(name),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_persons_files_never_land_in_the_working_directory() {
        let state = Path::new("/state");
        let with = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let file = |vars| beside_settings(&with(vars), "CUBA_EXEC_TOKENS", "tokens.toml", state);
        // Beside a settings file of its own; in the usual directory for /dev/null.
        assert_eq!(
            file(&[("CUBA_EXEC_CONFIG", "/etc/c/config.toml"), ("HOME", "/h")]),
            Path::new("/etc/c/tokens.toml")
        );
        assert_eq!(
            file(&[("CUBA_EXEC_CONFIG", "/dev/null"), ("HOME", "/h")]),
            Path::new("/h/.config/cuba-exec/tokens.toml")
        );
        // No home to find that by (or a relative one): the state directory, never `./`.
        assert_eq!(
            file(&[("CUBA_EXEC_CONFIG", "/dev/null")]),
            state.join("tokens.toml")
        );
        assert_eq!(
            file(&[("CUBA_EXEC_CONFIG", "/dev/null"), ("HOME", "")]),
            state.join("tokens.toml")
        );
        assert_eq!(
            file(&[("CUBA_EXEC_TOKENS", "/t/x.toml")]),
            Path::new("/t/x.toml")
        );
    }

    #[test]
    fn file_values_apply_and_env_wins() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "max_procs = 7\nttl = \"10m\"\nblocked_commands = [\"curl\"]\n\
             allowed_dirs = [\"/tmp\"]\naudit = true\nsandbox = \"workspace-write\"\n\
             network = false\nblocked_side_effects = [\"makes_network_requests\"]\n",
        )
        .unwrap();
        let f = file.display().to_string();
        let lookup = |k: &str| match k {
            "CUBA_EXEC_CONFIG" => Some(f.clone()),
            "CUBA_EXEC_MAX_PROCS" => Some("3".into()),
            _ => None,
        };
        let c = Config::new("/s".into(), "/d".into()).load(lookup).unwrap();
        assert_eq!(c.max_procs, 3, "the environment wins");
        assert_eq!(c.ttl, Duration::from_secs(600));
        assert_eq!(c.policy.blocked, ["curl".to_string()].into());
        assert_eq!(c.policy.dirs, [PathBuf::from("/tmp")]);
        assert!(c.audit_stderr);
        assert!(c.sandbox.workspace_write && c.sandbox.no_network);
        assert_eq!(
            c.blocked_side_effects,
            ["MAKES_NETWORK_REQUESTS".to_string()].into()
        );
        assert!(c.file_changes(lookup).is_empty());
        std::fs::write(&file, "max_procs = 9\nblocked_commands = [\"curl\"]\n").unwrap();
        let changes = c.file_changes(lookup);
        assert_eq!(changes.len(), 7, "{changes:?}");
        assert!(
            changes.iter().any(|l| l.contains(
                "CUBA_EXEC_MAX_PROCS \"7\" → \"9\" (the \
             environment's value wins)"
            )),
            "{changes:?}"
        );
        assert!(changes
            .iter()
            .any(|l| l.contains("CUBA_EXEC_TTL \"10m\" → (unset)")));
        std::fs::write(&file, "max_procs = [\n").unwrap();
        assert!(c.file_changes(lookup)[0].contains("does not read"));
    }

    #[test]
    fn an_explicit_missing_file_is_an_error_a_default_one_is_not() {
        let lookup = |k: &str| (k == "CUBA_EXEC_CONFIG").then(|| "/nonexistent/c.toml".into());
        assert!(Config::new("/s".into(), "/d".into()).load(lookup).is_err());
        let lookup = |k: &str| (k == "HOME").then(|| "/nonexistent".into());
        assert!(Config::new("/s".into(), "/d".into()).load(lookup).is_ok());
    }
}
