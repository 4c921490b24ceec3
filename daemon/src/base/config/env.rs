//! `CUBA_EXEC_*` settings (from the environment, or the config file's keys standing for them)
//! applied to a [`Config`]; a bad value is an error naming the variable.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::{parse_duration, parse_size, CgroupMode, Config};

use crate::base::policy::{dir_list, name_list};

impl Config {
    /// Applies `CUBA_EXEC_MAX_PROCS`, `CUBA_EXEC_BUFFER_SIZE`, `CUBA_EXEC_SPOOL_SIZE`,
    /// `CUBA_EXEC_TTL`, `CUBA_EXEC_MAX_FINISHED`, `CUBA_EXEC_MAX_CONNECTIONS`,
    /// `CUBA_EXEC_IDLE_TIMEOUT`, `CUBA_EXEC_SHUTDOWN_TIMEOUT` and the policy settings
    /// (`CUBA_EXEC_BLOCKED_COMMANDS`, `CUBA_EXEC_ALLOWED_COMMANDS`, `CUBA_EXEC_ALLOWED_DIRS`,
    /// `CUBA_EXEC_AUDIT`) and the sandbox (`CUBA_EXEC_SANDBOX`, `CUBA_EXEC_NETWORK`, and
    /// `TMPDIR` as a writable temp dir) from `lookup` (the environment).
    pub fn apply_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<Config> {
        self.apply_policy(&lookup)?;
        self.apply_sandbox(&lookup)?;
        self.apply_limits(&lookup)?;
        // A set but empty CUBA_EXEC_BLOCKED_SIDE_EFFECTS clears the blocked set.
        if let Some(v) = lookup("CUBA_EXEC_BLOCKED_SIDE_EFFECTS") {
            self.blocked_side_effects = crate::base::side_effects::parse_list(&v)
                .with_context(|| format!("CUBA_EXEC_BLOCKED_SIDE_EFFECTS={v:?}"))?;
        }
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        // A count of at least one: a setting of 0 would refuse everything.
        let count = |name: &str| -> Result<Option<usize>> {
            get(name)
                .map(|v| {
                    let n = v.trim().parse().ok().filter(|n| *n > 0);
                    n.with_context(|| format!("{name}={v:?}: expected a number >= 1"))
                })
                .transpose()
        };
        if let Some(n) = count("CUBA_EXEC_MAX_PROCS")? {
            self.max_procs = n;
        }
        if let Some(n) = count("CUBA_EXEC_MAX_FINISHED")? {
            self.max_finished = n;
        }
        if let Some(n) = count("CUBA_EXEC_EVENTS_KEEP")? {
            // The log holds at most 65536 (what the journal loads back).
            self.events_keep = n;
        }
        if let Some(n) = count("CUBA_EXEC_MAX_CONNECTIONS")? {
            self.max_connections = n;
        }
        if let Some(v) = get("CUBA_EXEC_IDLE_TIMEOUT") {
            self.idle_timeout = parse_duration(&v)
                .ok()
                .filter(|d| !d.is_zero())
                .with_context(|| {
                    format!("CUBA_EXEC_IDLE_TIMEOUT={v:?}: expected a duration > 0")
                })?;
        }
        if let Some(v) = get("CUBA_EXEC_ORPHAN_TIMEOUT") {
            let d = parse_duration(&v).with_context(|| {
                format!("CUBA_EXEC_ORPHAN_TIMEOUT={v:?}: expected a duration (0 keeps them)")
            })?;
            self.orphan_timeout = (!d.is_zero()).then_some(d);
        }
        self.agents.apply(&get)?;
        self.limits.budgets = self.agents.any_budget();
        if let Some(v) = get("CUBA_EXEC_BUFFER_SIZE") {
            let n = parse_size(&v).with_context(|| format!("CUBA_EXEC_BUFFER_SIZE={v:?}"))?;
            if n < 1024 {
                bail!("CUBA_EXEC_BUFFER_SIZE={v:?}: must be at least 1K");
            }
            self.buffer_size = usize::try_from(n).context("CUBA_EXEC_BUFFER_SIZE too large")?;
        }
        if let Some(v) = get("CUBA_EXEC_SPOOL_SIZE") {
            let n = parse_size(&v).with_context(|| format!("CUBA_EXEC_SPOOL_SIZE={v:?}"))?;
            if n < 64 * 1024 {
                bail!("CUBA_EXEC_SPOOL_SIZE={v:?}: must be at least 64K");
            }
            self.spool_cap = n;
        }
        if let Some(v) = get("CUBA_EXEC_TTL") {
            self.ttl = parse_duration(&v).with_context(|| format!("CUBA_EXEC_TTL={v:?}"))?;
        }
        if let Some(v) = get("CUBA_EXEC_SHUTDOWN_TIMEOUT") {
            self.grace =
                parse_duration(&v).with_context(|| format!("CUBA_EXEC_SHUTDOWN_TIMEOUT={v:?}"))?;
        }
        Ok(self)
    }

    /// The policy variables. A set but empty `CUBA_EXEC_BLOCKED_COMMANDS` clears the blocklist;
    /// an empty allowlist or directory list means "not set".
    fn apply_policy(&mut self, lookup: &impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(v) = lookup("CUBA_EXEC_BLOCKED_COMMANDS") {
            self.policy.blocked = name_list(&v);
        }
        if let Some(v) = lookup("CUBA_EXEC_ALLOWED_COMMANDS").filter(|v| !v.trim().is_empty()) {
            self.policy.allowed = Some(name_list(&v));
        }
        if let Some(v) = lookup("CUBA_EXEC_ALLOWED_DIRS").filter(|v| !v.trim().is_empty()) {
            let dirs = dir_list(&v);
            if let Some(d) = dirs.iter().find(|d| !d.is_absolute()) {
                bail!(
                    "CUBA_EXEC_ALLOWED_DIRS={v:?}: {} is not an absolute path",
                    d.display()
                );
            }
            self.policy.dirs = dirs;
        }
        if let Some(v) = lookup("CUBA_EXEC_ASK_COMMANDS") {
            self.policy.ask.commands = crate::base::policy::pattern_list(&v);
        }
        if let Some(v) = lookup("CUBA_EXEC_ASK_SIDE_EFFECTS") {
            self.policy.ask.side_effects = crate::base::side_effects::parse_list(&v)
                .with_context(|| format!("CUBA_EXEC_ASK_SIDE_EFFECTS={v:?}"))?;
        }
        if let Some(v) = lookup("CUBA_EXEC_ASK_DIRS").filter(|v| !v.trim().is_empty()) {
            let dirs = dir_list(&v);
            if let Some(d) = dirs.iter().find(|d| !d.is_absolute()) {
                bail!(
                    "CUBA_EXEC_ASK_DIRS={v:?}: {} is not an absolute path",
                    d.display()
                );
            }
            self.policy.ask.dirs = dirs;
        }
        if let Some(v) = lookup("CUBA_EXEC_APPROVAL_TIMEOUT").filter(|v| !v.trim().is_empty()) {
            self.approval_timeout = parse_duration(&v)
                .ok()
                .filter(|d| !d.is_zero())
                .with_context(|| {
                    format!("CUBA_EXEC_APPROVAL_TIMEOUT={v:?}: expected a duration > 0")
                })?;
        }
        if let Some(v) = lookup("CUBA_EXEC_NOTIFY").filter(|v| !v.trim().is_empty()) {
            self.notify = super::Notify::parse(&v);
        }
        if let Some(v) = lookup("CUBA_EXEC_UNRESOLVED").filter(|v| !v.trim().is_empty()) {
            self.policy.refuse_unresolved = crate::base::policy::unresolved_setting(&v)
                .map_err(|e| anyhow::anyhow!("CUBA_EXEC_UNRESOLVED={e}"))?;
        }
        if let Some(v) = lookup("CUBA_EXEC_EXEC_CHECKS").filter(|v| !v.trim().is_empty()) {
            self.exec_checks = super::ExecChecks::parse(&v)
                .map_err(|e| anyhow::anyhow!("CUBA_EXEC_EXEC_CHECKS={e}"))?;
        }
        if let Some(v) = lookup("CUBA_EXEC_NAMESPACES").filter(|v| !v.trim().is_empty()) {
            self.allow_namespaces = match v.trim().to_ascii_lowercase().as_str() {
                "allow" => true,
                "refuse" => false,
                _ => bail!("CUBA_EXEC_NAMESPACES={v:?}: expected refuse or allow"),
            };
        }
        if let Some(v) = lookup("CUBA_EXEC_AUDIT").filter(|v| !v.trim().is_empty()) {
            self.audit_stderr = match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => bail!("CUBA_EXEC_AUDIT={v:?}: expected 1 or 0"),
            };
        }
        Ok(())
    }

    /// `CUBA_EXEC_AUDIT_MAX` (a size), the rlimits `CUBA_EXEC_RLIMIT_CPU` (seconds),
    /// `CUBA_EXEC_RLIMIT_FSIZE` (a size), `CUBA_EXEC_RLIMIT_NOFILE` (a count),
    /// `CUBA_EXEC_RLIMIT_AS` (a size), and the cgroup limits `CUBA_EXEC_PIDS_MAX` (a count) and
    /// `CUBA_EXEC_MEMORY_MAX` (a size). An empty value means "not set".
    fn apply_limits(&mut self, lookup: &impl Fn(&str) -> Option<String>) -> Result<()> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        if let Some(v) = get("CUBA_EXEC_AUDIT_MAX") {
            let n = parse_size(&v).with_context(|| format!("CUBA_EXEC_AUDIT_MAX={v:?}"))?;
            if n < 1024 {
                bail!("CUBA_EXEC_AUDIT_MAX={v:?}: must be at least 1K");
            }
            self.audit_max = n;
        }
        let count = |name: &str| -> Result<Option<u64>> {
            get(name)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|n| *n > 0)
                        .with_context(|| format!("{name}={v:?}: expected a number >= 1"))
                })
                .transpose()
        };
        let size = |name: &str| -> Result<Option<u64>> {
            get(name)
                .map(|v| {
                    parse_size(&v)
                        .ok()
                        .filter(|n| *n > 0)
                        .with_context(|| format!("{name}={v:?}: expected a size such as 1M"))
                })
                .transpose()
        };
        let l = &mut self.limits;
        if let Some(n) = count("CUBA_EXEC_RLIMIT_CPU")? {
            l.cpu_seconds = Some(n);
        }
        if let Some(n) = size("CUBA_EXEC_RLIMIT_FSIZE")? {
            l.file_size = Some(n);
        }
        if let Some(n) = count("CUBA_EXEC_RLIMIT_NOFILE")? {
            l.open_files = Some(n);
        }
        if let Some(n) = size("CUBA_EXEC_RLIMIT_AS")? {
            l.address_space = Some(n);
        }
        if let Some(n) = count("CUBA_EXEC_PIDS_MAX")? {
            l.pids_max = Some(n);
        }
        if let Some(n) = size("CUBA_EXEC_MEMORY_MAX")? {
            l.memory_max = Some(n);
        }
        // `cgroups = "off"` wins over a parent: turning them off is the way out of a bad one.
        if let Some(v) = get("CUBA_EXEC_CGROUP_PARENT") {
            let path = PathBuf::from(v.trim());
            if !path.is_absolute() {
                bail!("CUBA_EXEC_CGROUP_PARENT={v:?}: expected an absolute path");
            }
            l.cgroups = CgroupMode::Parent(path);
        }
        if let Some(v) = get("CUBA_EXEC_CGROUPS") {
            match v.trim() {
                "off" => l.cgroups = CgroupMode::Off,
                "on" if l.cgroups == CgroupMode::Auto => l.cgroups = CgroupMode::On,
                "on" | "auto" => {}
                _ => bail!("CUBA_EXEC_CGROUPS={v:?}: expected \"auto\", \"on\" or \"off\""),
            }
        }
        Ok(())
    }

    /// `CUBA_EXEC_SANDBOX` (`workspace-write`, or `off`), `CUBA_EXEC_NETWORK` (`1`/`0`/`proxy`)
    /// with the proxy's rules (`CUBA_EXEC_PROXY_ALLOW`, `_DENY`, `_READ_ONLY`, `_UNKNOWN`), the
    /// masks (`CUBA_EXEC_DENY_READ`, `CUBA_EXEC_DENY_READ_DEFAULTS`), the Unix sockets a
    /// sandboxed command may reach (`CUBA_EXEC_UNIX_SOCKETS`), and the daemon's `TMPDIR` (an
    /// absolute path), which the sandbox lets commands write to.
    fn apply_sandbox(&mut self, lookup: &impl Fn(&str) -> Option<String>) -> Result<()> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let list = |v: String| -> Vec<String> {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        if let Some(v) = get("CUBA_EXEC_SANDBOX") {
            self.sandbox.workspace_write = match v.trim().to_ascii_lowercase().as_str() {
                "workspace-write" => true,
                "off" | "none" | "0" | "false" => false,
                _ => bail!("CUBA_EXEC_SANDBOX={v:?}: expected \"workspace-write\" or \"off\""),
            };
        }
        if let Some(v) = get("CUBA_EXEC_NETWORK") {
            let (no_network, proxy) = match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => (false, false),
                "0" | "false" | "no" | "off" => (true, false),
                "proxy" => (false, true),
                _ => bail!(
                    "CUBA_EXEC_NETWORK={v:?}: expected 1 (allowed), 0 (no network) or proxy \
                     (only through the daemon's proxy, by its rules)"
                ),
            };
            self.sandbox.no_network = no_network;
            self.sandbox.proxy = proxy.then(|| self.sandbox.proxy.take().unwrap_or_default());
        }
        if let Some(rules) = self.sandbox.proxy.as_mut() {
            if let Some(v) = get("CUBA_EXEC_PROXY_ALLOW") {
                rules.allow = list(v);
            }
            if let Some(v) = get("CUBA_EXEC_PROXY_DENY") {
                rules.deny = list(v);
            }
            if let Some(v) = get("CUBA_EXEC_PROXY_READ_ONLY") {
                rules.read_only = list(v);
            }
            if let Some(v) = get("CUBA_EXEC_PROXY_UNKNOWN") {
                rules.unknown = v.trim().to_ascii_lowercase();
            }
            // The patterns are checked where the proxy's rules are built, at the start.
            if !["", "deny", "ask", "allow"].contains(&rules.unknown.as_str()) {
                bail!(
                    "CUBA_EXEC_PROXY_UNKNOWN={:?}: expected deny, ask or allow",
                    rules.unknown
                );
            }
        }
        if let Some(v) = get("CUBA_EXEC_DENY_READ") {
            self.deny_read = list(v);
        }
        if let Some(v) = get("CUBA_EXEC_DENY_READ_DEFAULTS") {
            self.deny_read_defaults = match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => bail!("CUBA_EXEC_DENY_READ_DEFAULTS={v:?}: expected true or false"),
            };
        }
        if let Some(v) = get("CUBA_EXEC_UNIX_SOCKETS") {
            let sockets: Vec<PathBuf> = list(v).into_iter().map(PathBuf::from).collect();
            if let Some(bad) = sockets.iter().find(|p| !p.is_absolute()) {
                bail!("CUBA_EXEC_UNIX_SOCKETS: {bad:?} is not an absolute path");
            }
            self.sandbox.unix_sockets = sockets;
        }
        if let Some(v) = lookup("TMPDIR").filter(|v| v.starts_with('/')) {
            self.sandbox.tmpdir = Some(PathBuf::from(v));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn env_overrides_and_rejects_nonsense() {
        let base = Config::new("/s".into(), "/d".into());
        let c = base
            .clone()
            .apply_env(|k| match k {
                "CUBA_EXEC_MAX_PROCS" => Some("3".into()),
                "CUBA_EXEC_TTL" => Some("10s".into()),
                "CUBA_EXEC_SHUTDOWN_TIMEOUT" => Some("200ms".into()),
                _ => None,
            })
            .unwrap();
        assert_eq!(c.max_procs, 3);
        assert_eq!(c.ttl, Duration::from_secs(10));
        assert_eq!(c.grace, Duration::from_millis(200));
        let err = base
            .apply_env(|k| (k == "CUBA_EXEC_MAX_PROCS").then(|| "0".into()))
            .unwrap_err();
        assert!(format!("{err:#}").contains("CUBA_EXEC_MAX_PROCS"));
    }

    #[test]
    fn orphan_timeout_defaults_to_half_an_hour_and_zero_keeps_them() {
        let base = Config::new("/s".into(), "/d".into());
        assert_eq!(base.orphan_timeout, Some(Duration::from_secs(1800)));
        let with = |v: &str| {
            let v = v.to_string();
            base.clone()
                .apply_env(move |k| (k == "CUBA_EXEC_ORPHAN_TIMEOUT").then(|| v.clone()))
        };
        assert_eq!(with("0").unwrap().orphan_timeout, None);
        assert_eq!(
            with("2h").unwrap().orphan_timeout,
            Some(Duration::from_secs(7200))
        );
        let err = with("soon").unwrap_err();
        assert!(
            format!("{err:#}").contains("CUBA_EXEC_ORPHAN_TIMEOUT"),
            "{err:#}"
        );
    }

    #[test]
    fn limit_settings_parse() {
        let base = Config::new("/s".into(), "/d".into());
        assert!(base.limits.is_empty());
        assert_eq!(base.audit_max, 8 << 20);
        let c = base
            .clone()
            .apply_env(|k| match k {
                "CUBA_EXEC_AUDIT_MAX" => Some("4K".into()),
                "CUBA_EXEC_RLIMIT_CPU" => Some("10".into()),
                "CUBA_EXEC_RLIMIT_FSIZE" => Some("1M".into()),
                "CUBA_EXEC_RLIMIT_NOFILE" => Some("64".into()),
                "CUBA_EXEC_MEMORY_MAX" => Some("512M".into()),
                _ => None,
            })
            .unwrap();
        assert_eq!(c.audit_max, 4096);
        assert_eq!(c.limits.cpu_seconds, Some(10));
        assert_eq!(c.limits.file_size, Some(1 << 20));
        assert_eq!(c.limits.open_files, Some(64));
        assert_eq!(c.limits.memory_max, Some(512 << 20));
        assert_eq!(c.limits.address_space, None);
        let err = base
            .apply_env(|k| (k == "CUBA_EXEC_RLIMIT_NOFILE").then(|| "many".into()))
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("CUBA_EXEC_RLIMIT_NOFILE"),
            "{err:#}"
        );
    }

    #[test]
    fn sandbox_settings_parse() {
        let base = Config::new("/s".into(), "/d".into());
        assert!(!base.sandbox.active(), "off by default");
        let c = base
            .clone()
            .apply_env(|k| match k {
                "CUBA_EXEC_SANDBOX" => Some("workspace-write".into()),
                "CUBA_EXEC_NETWORK" => Some("0".into()),
                "TMPDIR" => Some("/var/tmp/me".into()),
                _ => None,
            })
            .unwrap();
        assert!(c.sandbox.workspace_write && c.sandbox.no_network);
        assert_eq!(c.sandbox.tmpdir, Some(PathBuf::from("/var/tmp/me")));
        let err = base
            .clone()
            .apply_env(|k| (k == "CUBA_EXEC_SANDBOX").then(|| "read-only".into()))
            .unwrap_err();
        assert!(format!("{err:#}").contains("CUBA_EXEC_SANDBOX"), "{err:#}");
        let err = base
            .apply_env(|k| (k == "CUBA_EXEC_NETWORK").then(|| "maybe".into()))
            .unwrap_err();
        assert!(format!("{err:#}").contains("CUBA_EXEC_NETWORK"), "{err:#}");
    }
}
