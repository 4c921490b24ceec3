//! The command policy: which shell text `cubad` agrees to run, and where. The text is parsed
//! with a full bash parser (`walk`), every simple command it could run is collected, and each
//! is held against the blocklist and the optional allowlist. This is a seatbelt, not a sandbox:
//! a program the lists allow (`python -c`, a compiled binary) can still do anything.

mod ask;
mod consts;
mod narrow;
mod parsed;
mod script;
mod seen;
mod unread;
mod walk;
mod words;
mod wrappers;

#[cfg(test)]
mod script_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cuba_protocol::PolicyDecision;

pub use ask::{pattern_list, AskRules};
pub use narrow::Effective;
pub use parsed::collect;
pub use walk::Seen;

/// The 27 names of Cuba-Exec's default blocklist.
pub const DEFAULT_BLOCKED: [&str; 27] = [
    "rm",
    "dd",
    "mkfs",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "init",
    "systemctl",
    "passwd",
    "chown",
    "chmod",
    "chgrp",
    "mount",
    "umount",
    "fdisk",
    "parted",
    "iptables",
    "nft",
    "ip6tables",
    "crontab",
    "at",
    "useradd",
    "userdel",
    "groupadd",
    "groupdel",
    "visudo",
];

/// What the daemon lets clients run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Policy {
    /// Program names refused anywhere in a command (`mkfs` also covers `mkfs.ext4`).
    pub blocked: BTreeSet<String>,
    /// When set, every simple command must be one of these, and a name known only at run
    /// time is refused.
    pub allowed: Option<BTreeSet<String>>,
    /// When non-empty, a process's working directory must lie inside one of these.
    pub dirs: Vec<PathBuf>,
    /// Under a blocklist alone: refuse a command that cannot be resolved before run time
    /// (`unresolved = "refuse"`), instead of allowing it and naming it in the audit line.
    /// Under an allowlist such a command is always refused.
    pub refuse_unresolved: bool,
    /// What runs only once a person approves it.
    #[serde(default)]
    pub ask: AskRules,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            blocked: DEFAULT_BLOCKED.iter().map(|s| s.to_string()).collect(),
            allowed: None,
            dirs: Vec::new(),
            refuse_unresolved: false,
            ask: AskRules::default(),
        }
    }
}

/// `unresolved = "allow" | "refuse"` (`CUBA_EXEC_UNRESOLVED`): whether it refuses.
pub fn unresolved_setting(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "allow" => Ok(false),
        "refuse" => Ok(true),
        other => Err(format!("{other:?}: expected allow or refuse")),
    }
}

/// Splits a name list (`rm, dd`): commas, whitespace around names, empty entries dropped.
pub fn name_list(text: &str) -> BTreeSet<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Splits a directory list on `,` and the OS's list separator, as `PATH` has it: `:`, or `;` on
/// Windows, where a `:` follows every drive letter.
pub fn dir_list(text: &str) -> Vec<PathBuf> {
    split_dirs(text, if cfg!(windows) { ';' } else { ':' })
}

fn split_dirs(text: &str, list: char) -> Vec<PathBuf> {
    text.split([list, ','])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect()
}

fn refuse(rule: &str, offending: &str, commands: Vec<String>, message: String) -> PolicyDecision {
    PolicyDecision {
        allowed: false,
        rule: Some(rule.to_string()),
        offending: Some(offending.to_string()),
        commands,
        message,
        nested: Vec::new(),
        ask: None,
    }
}

impl Policy {
    pub fn is_blocked(&self, name: &str) -> bool {
        self.blocked.contains(name)
            || name
                .split_once('.')
                .is_some_and(|(stem, _)| self.blocked.contains(stem))
    }

    /// The decision on shell text, with the texts it followed.
    pub fn check(&self, text: &str) -> PolicyDecision {
        match &*collect(text) {
            Ok((seen, nested)) => PolicyDecision {
                nested: nested.clone(),
                ..self.verdict(seen)
            },
            Err(e) => refuse(
                "parse",
                text,
                Vec::new(),
                format!("the command does not parse as shell text ({e}); it was not run"),
            ),
        }
    }

    /// The decision on the simple commands `seen` in a text.
    fn verdict(&self, seen: &[Seen]) -> PolicyDecision {
        let commands: Vec<String> = seen.iter().map(Seen::display).collect();
        for s in seen {
            if let Some(name) = s.name.as_deref().filter(|n| self.is_blocked(n)) {
                let msg = format!(
                    "`{name}` is on the blocklist (in `{}`); run something else, or ask the \
                     user to change CUBA_EXEC_BLOCKED_COMMANDS",
                    s.text
                );
                return refuse("blocklist", &s.text, commands, msg);
            }
            let Some(allowed) = &self.allowed else {
                continue;
            };
            if let Some(why) = s.unresolved {
                let msg = format!(
                    "`{}` cannot be checked against the allowlist: {why}; write the command \
                     out literally",
                    s.text
                );
                return refuse("unresolved", &s.text, commands, msg);
            }
            if let Some(name) = s.name.as_deref().filter(|n| !allowed.contains(*n)) {
                let msg = format!(
                    "`{name}` is not on the allowlist (in `{}`); allowed: {}",
                    s.text,
                    allowed.iter().cloned().collect::<Vec<_>>().join(", ")
                );
                return refuse("allowlist", &s.text, commands, msg);
            }
        }
        // The strict mode, after every blocklist check: a blocked name is the better reason.
        if self.refuse_unresolved && self.allowed.is_none() {
            if let Some((s, why)) = seen.iter().find_map(|s| Some((s, s.unresolved?))) {
                let msg = format!(
                    "`{}` cannot be checked: {why}; write the command out literally (unresolved = \
                     \"refuse\")",
                    s.text
                );
                return refuse("unresolved", &s.text, commands, msg);
            }
        }
        let unresolved = seen.iter().filter(|s| s.unresolved.is_some()).count();
        let mut message = if unresolved > 0 {
            format!(
                "allowed; {unresolved} command(s) could not be resolved before run time and \
                 were not checked"
            )
        } else {
            "allowed".to_string()
        };
        // Allowed, and one of its commands needs a person's approval first.
        let asked = seen.iter().find_map(|s| {
            let args: Vec<Option<&str>> = s.args.iter().map(Option::as_deref).collect();
            Some((s, self.ask.command(s.name.as_deref()?, &args)?))
        });
        let (ask, offending) = match asked {
            Some((s, pattern)) => {
                message = format!(
                    "allowed once a person approves: `{}` matches ask_commands `{pattern}`",
                    s.text
                );
                (
                    Some(format!("ask_commands: {pattern}")),
                    Some(s.text.clone()),
                )
            }
            None => (None, None),
        };
        PolicyDecision {
            allowed: true,
            rule: None,
            offending,
            commands,
            message,
            nested: Vec::new(),
            ask,
        }
    }

    /// The decision on a spawn: its shell (when not the default), its text, then its cwd.
    pub fn check_spawn(&self, shell: Option<&str>, text: &str, cwd: &Path) -> PolicyDecision {
        if let Some(shell) = shell {
            let name = shell.rsplit('/').next().unwrap_or(shell);
            let is_sh = matches!(
                name,
                "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash"
            );
            if self.is_blocked(name) {
                let msg = format!("the shell `{name}` is on the blocklist");
                return refuse("blocklist", shell, Vec::new(), msg);
            }
            if !is_sh && self.allowed.as_ref().is_some_and(|a| !a.contains(name)) {
                let msg = format!(
                    "the text would be run by `{shell}`, which is not a POSIX shell the policy \
                     can read and not on the allowlist"
                );
                return refuse("unresolved", shell, Vec::new(), msg);
            }
        }
        let mut decision = self.check(text);
        if !decision.allowed {
            return decision;
        }
        if let Err(refusal) = self.check_dir(cwd) {
            return PolicyDecision {
                commands: decision.commands,
                nested: decision.nested,
                ..*refusal
            };
        }
        if decision.ask.is_none() {
            if let Some(dir) = self.ask.dir(cwd) {
                decision.message = format!(
                    "allowed once a person approves: its directory {} lies inside ask_dirs {}",
                    cwd.display(),
                    dir.display()
                );
                decision.ask = Some(format!("ask_dirs: {}", dir.display()));
                decision.offending = Some(cwd.display().to_string());
            }
        }
        decision
    }

    /// Checks a working directory against the allowed roots, after resolving symlinks and `..`.
    pub fn check_dir(&self, cwd: &Path) -> Result<(), Box<PolicyDecision>> {
        if self.dirs.is_empty() {
            return Ok(());
        }
        let shown = cwd.display().to_string();
        let real = std::fs::canonicalize(cwd).map_err(|e| {
            let msg = format!("cwd {shown} cannot be resolved ({e}), so it cannot be checked");
            Box::new(refuse("allowed_dirs", &shown, Vec::new(), msg))
        })?;
        let inside = self.dirs.iter().any(|root| {
            let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
            real.starts_with(root)
        });
        if inside {
            return Ok(());
        }
        let roots: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        let msg = format!(
            "cwd {} is outside the allowed directories ({}); pass a cwd inside one of them",
            real.display(),
            roots.join(", ")
        );
        Err(Box::new(refuse("allowed_dirs", &shown, Vec::new(), msg)))
    }
}
