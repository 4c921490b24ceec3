//! Per-client narrowing: a client's own `CUBA_EXEC_BLOCKED_COMMANDS`, `CUBA_EXEC_ALLOWED_COMMANDS`
//! and `CUBA_EXEC_ALLOWED_DIRS` (from the environment in its `Hello`) can only add to the daemon's
//! rules: blocked names are a union, allowed names an intersection, allowed roots only what lies
//! inside both. Nothing a client sends can lift a daemon rule.
//!
//! An [`Effective`] policy is computed once per connection. A decision first asks the daemon's
//! own policy, then the narrowed one, so it can say whose rule tripped.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use cuba_protocol::PolicyDecision;

use super::{dir_list, name_list, Policy};

/// The policy one connection (and every process it starts) is held to. Serialisable: a
/// record's is handed over by an in-place upgrade.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Effective {
    /// The daemon's own policy: refusals it makes are the daemon's.
    daemon: Policy,
    /// The daemon's policy with every narrowing applied.
    rules: Policy,
    /// The roots were narrowed to nothing (a client's roots all lie outside the daemon's): no
    /// working directory is allowed. `rules.dirs` is empty then, which alone would mean "any".
    no_dirs: bool,
    /// Who narrowed the daemon's policy (for decisions); `None` when nobody did.
    by: Option<String>,
    /// Sandboxing a client asked for on top of the daemon's (`CUBA_EXEC_SANDBOX`,
    /// `CUBA_EXEC_NETWORK=0` in its environment): a client can add confinement, never remove it.
    pub write_confined: bool,
    pub no_network: bool,
}

fn lookup<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsString> {
    // The last one wins, as it would for a process started with this environment.
    env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The roots inside both sets: for each pair, the deeper one when one contains the other.
/// Empty input sets mean "no restriction" and are handled by the caller.
fn meet_dirs(a: &[PathBuf], b: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for x in a.iter().map(|p| canonical(p)) {
        for y in b.iter().map(|p| canonical(p)) {
            let inner = if x.starts_with(&y) {
                x.clone()
            } else if y.starts_with(&x) {
                y
            } else {
                continue;
            };
            if !out.contains(&inner) {
                out.push(inner);
            }
        }
    }
    out
}

/// Both rule sets at once (`*_none`: that side allows no directory at all).
fn meet(a: &Policy, a_none: bool, b: &Policy, b_none: bool) -> (Policy, bool) {
    let blocked = a.blocked.union(&b.blocked).cloned().collect();
    let allowed = match (&a.allowed, &b.allowed) {
        (None, x) | (x, None) => x.clone(),
        (Some(x), Some(y)) => Some(x.intersection(y).cloned().collect::<BTreeSet<_>>()),
    };
    let (dirs, none) = if a_none || b_none {
        (Vec::new(), true)
    } else if a.dirs.is_empty() {
        (b.dirs.clone(), false)
    } else if b.dirs.is_empty() {
        (a.dirs.clone(), false)
    } else {
        let dirs = meet_dirs(&a.dirs, &b.dirs);
        let none = dirs.is_empty();
        (dirs, none)
    };
    let policy = Policy {
        blocked,
        allowed,
        dirs,
        refuse_unresolved: a.refuse_unresolved || b.refuse_unresolved,
        ask: a.ask.union(&b.ask),
    };
    (policy, none)
}

fn join(a: Option<&str>, b: Option<&str>) -> Option<String> {
    match (a, b) {
        (None, None) => None,
        (Some(x), None) | (None, Some(x)) => Some(x.to_string()),
        (Some(x), Some(y)) if x == y => Some(x.to_string()),
        (Some(x), Some(y)) => Some(format!("{x}; {y}")),
    }
}

impl Effective {
    /// The daemon's policy, not narrowed.
    pub fn daemon(policy: &Policy) -> Effective {
        Effective {
            daemon: policy.clone(),
            rules: policy.clone(),
            no_dirs: false,
            by: None,
            write_confined: false,
            no_network: false,
        }
    }

    /// The rules in force, after narrowing.
    pub fn rules(&self) -> &Policy {
        &self.rules
    }

    /// Who narrowed the daemon's policy, if anyone.
    pub fn narrowed_by(&self) -> Option<&str> {
        self.by.as_deref()
    }

    /// This policy narrowed by the `CUBA_EXEC_*` policy variables in a client's environment.
    /// `who` names the client in decisions. Unset or empty variables narrow nothing; a relative
    /// directory is ignored (it could only be resolved against the client's cwd, which a client
    /// chooses freely) and logged.
    pub fn narrow_env(&self, who: &str, env: &[(OsString, OsString)]) -> Effective {
        let get = |name: &str| {
            lookup(env, name)
                .map(|v| v.to_string_lossy().into_owned())
                .filter(|v| !v.trim().is_empty())
        };
        let mut client = Policy {
            blocked: BTreeSet::new(),
            allowed: None,
            dirs: Vec::new(),
            refuse_unresolved: false,
            ask: super::AskRules::default(),
        };
        let mut any = false;
        let write_confined = self.write_confined
            || get("CUBA_EXEC_SANDBOX").is_some_and(|v| v.trim() == "workspace-write");
        let no_network =
            self.no_network || get("CUBA_EXEC_NETWORK").is_some_and(|v| v.trim() == "0");
        if let Some(v) = get("CUBA_EXEC_BLOCKED_COMMANDS") {
            client.blocked = name_list(&v);
            any |= !client.blocked.is_subset(&self.rules.blocked);
        }
        if let Some(v) = get("CUBA_EXEC_ALLOWED_COMMANDS") {
            client.allowed = Some(name_list(&v));
            any = true;
        }
        // Stricter only: a client can ask for refusals, never take the daemon's away.
        if get("CUBA_EXEC_UNRESOLVED").is_some_and(|v| v.trim().eq_ignore_ascii_case("refuse")) {
            client.refuse_unresolved = true;
            any |= !self.rules.refuse_unresolved;
        }
        // A client can ask to be asked about more, never about less.
        if let Some(v) = get("CUBA_EXEC_ASK_COMMANDS") {
            client.ask.commands = super::pattern_list(&v);
        }
        if let Some(v) = get("CUBA_EXEC_ASK_SIDE_EFFECTS") {
            client.ask.side_effects = name_list(&v)
                .into_iter()
                .map(|c| c.to_ascii_uppercase())
                .collect();
        }
        if let Some(v) = get("CUBA_EXEC_ASK_DIRS") {
            client.ask.dirs = dir_list(&v)
                .into_iter()
                .filter(|d| d.is_absolute())
                .collect();
        }
        let asks_more = self.rules.ask.union(&client.ask) != self.rules.ask;
        any |= asks_more;
        if let Some(v) = get("CUBA_EXEC_ALLOWED_DIRS") {
            let (abs, rel): (Vec<PathBuf>, Vec<PathBuf>) =
                dir_list(&v).into_iter().partition(|d| d.is_absolute());
            if !rel.is_empty() {
                tracing::warn!(
                    client = who,
                    ?rel,
                    "relative CUBA_EXEC_ALLOWED_DIRS ignored"
                );
            }
            if !abs.is_empty() {
                client.dirs = abs;
                any = true;
            }
        }
        if !any {
            return Effective {
                write_confined,
                no_network,
                ..self.clone()
            };
        }
        let (rules, no_dirs) = meet(&self.rules, self.no_dirs, &client, false);
        Effective {
            daemon: self.daemon.clone(),
            rules,
            no_dirs,
            by: join(self.by.as_deref(), Some(&format!("client `{who}`"))),
            write_confined,
            no_network,
        }
    }

    /// Both policies at once: what a connection from inside another client's process tree gets.
    /// `via` says how `other` came to apply (for decisions).
    pub fn meet(&self, other: &Effective, via: &str) -> Effective {
        let (rules, no_dirs) = meet(&self.rules, self.no_dirs, &other.rules, other.no_dirs);
        let theirs = other.by.as_ref().map(|b| format!("{b} ({via})"));
        Effective {
            daemon: self.daemon.clone(),
            rules,
            no_dirs,
            by: join(theirs.as_deref(), self.by.as_deref()),
            write_confined: self.write_confined || other.write_confined,
            no_network: self.no_network || other.no_network,
        }
    }

    fn label(&self, mut decision: PolicyDecision, daemon: bool) -> PolicyDecision {
        if !decision.allowed {
            let whose = match (&self.by, daemon) {
                (Some(by), false) => format!("client policy (set by {by})"),
                _ => "daemon policy".to_string(),
            };
            decision.message = format!("{whose}: {}", decision.message);
        }
        decision
    }

    /// The decision on shell text (`PolicyCheck`).
    pub fn check(&self, text: &str) -> PolicyDecision {
        let first = self.daemon.check(text);
        if !first.allowed || self.by.is_none() {
            return self.label(first, true);
        }
        self.label(self.rules.check(text), false)
    }

    /// The decision on a text in a language the policy does not read (`Policy::check_unread`).
    pub fn check_unread(&self, shell: &str, text: &str, cwd: &std::path::Path) -> PolicyDecision {
        let first = self.daemon.check_unread(shell, text, cwd);
        if !first.allowed || self.by.is_none() {
            return self.label(first, true);
        }
        self.label(self.rules.check_unread(shell, text, cwd), false)
    }

    /// The decision on a spawn.
    pub fn check_spawn(
        &self,
        shell: Option<&str>,
        text: &str,
        cwd: &std::path::Path,
    ) -> PolicyDecision {
        let first = self.daemon.check_spawn(shell, text, cwd);
        if !first.allowed || self.by.is_none() {
            return self.label(first, true);
        }
        let mut decision = self.rules.check_spawn(shell, text, cwd);
        if decision.allowed && self.no_dirs {
            let shown = cwd.display().to_string();
            decision = super::refuse(
                "allowed_dirs",
                &shown,
                decision.commands,
                "no directory is allowed: the client's CUBA_EXEC_ALLOWED_DIRS all lie outside \
                 the daemon's allowed directories"
                    .to_string(),
            );
        }
        self.label(decision, false)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn env(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn client_lists_only_narrow() {
        let daemon = Policy {
            allowed: Some(name_list("ls,echo,rm")),
            ..Policy::default()
        };
        let base = Effective::daemon(&daemon);
        let e = base.narrow_env(
            "c",
            &env(&[
                ("CUBA_EXEC_BLOCKED_COMMANDS", "curl"),
                ("CUBA_EXEC_ALLOWED_COMMANDS", "echo,curl"),
            ]),
        );
        assert!(e.rules().blocked.contains("rm") && e.rules().blocked.contains("curl"));
        assert_eq!(e.rules().allowed, Some(name_list("echo")));
        assert!(e.check("echo hi").allowed);
        let d = e.check("ls");
        assert!(
            !d.allowed && d.message.starts_with("client policy (set by"),
            "{d:?}"
        );
        let d = e.check("rm x");
        assert!(
            !d.allowed
                && d.message
                    .starts_with("daemon policy: `rm` is on the blocklist"),
            "{d:?}"
        );
        // Empty values narrow nothing and clear nothing.
        let same = base.narrow_env("c", &env(&[("CUBA_EXEC_BLOCKED_COMMANDS", "")]));
        assert_eq!(same.rules(), &daemon);
        assert!(same.narrowed_by().is_none());
    }

    #[test]
    fn roots_meet_inside_both() {
        let a = [PathBuf::from("/w"), PathBuf::from("/x/y")];
        let b = [
            PathBuf::from("/w/sub"),
            PathBuf::from("/x"),
            PathBuf::from("/z"),
        ];
        assert_eq!(
            meet_dirs(&a, &b),
            [PathBuf::from("/w/sub"), PathBuf::from("/x/y")]
        );
        let daemon = Policy {
            dirs: vec![PathBuf::from("/w")],
            ..Policy::default()
        };
        let e =
            Effective::daemon(&daemon).narrow_env("c", &env(&[("CUBA_EXEC_ALLOWED_DIRS", "/z")]));
        assert!(e.no_dirs && e.rules().dirs.is_empty());
        let d = e.check_spawn(None, "true", Path::new("/w"));
        assert_eq!(d.rule.as_deref(), Some("allowed_dirs"), "{d:?}");
    }
}
