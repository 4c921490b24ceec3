//! Text the policy cannot read: what a `cmd.exe` or PowerShell shell runs on Windows. No
//! parser for those languages exists here, so such a text is `unresolved` as a whole, one
//! command whose parts are not known before run time.

use std::path::Path;

use cuba_protocol::PolicyDecision;

use super::{refuse, Policy};

impl Policy {
    /// The decision on `text` run by `shell`, a shell whose language the policy does not
    /// read: refused under an allowlist, with `unresolved = "refuse"`, when the shell itself is
    /// blocked, or when `ask` rules exist (nothing in it could be held for a person); else
    /// allowed as unresolved, and its working directory checked as any other's.
    pub fn check_unread(&self, shell: &str, text: &str, cwd: &Path) -> PolicyDecision {
        let name = shell.rsplit(['\\', '/']).next().unwrap_or(shell);
        let stem = name
            .strip_suffix(".exe")
            .or_else(|| name.strip_suffix(".EXE"))
            .unwrap_or(name);
        let shown = format!("?({text})");
        if self.is_blocked(stem) || self.is_blocked(name) {
            let msg = format!("the shell `{stem}` is on the blocklist");
            return refuse("blocklist", shell, vec![shown], msg);
        }
        let strict = if self.allowed.is_some() {
            Some("the allowlist")
        } else if self.refuse_unresolved {
            Some("unresolved = \"refuse\"")
        } else if !self.ask.is_empty() {
            Some("ask rules")
        } else {
            None
        };
        if let Some(rule) = strict {
            let msg = format!(
                "a `{stem}` text cannot be checked ({rule} is set and the policy reads only \
                 POSIX shell text); run it with a POSIX shell (Git Bash: shell = \"bash.exe\")"
            );
            return refuse("unresolved", text, vec![shown], msg);
        }
        if let Err(refusal) = self.check_dir(cwd) {
            return PolicyDecision {
                commands: vec![shown],
                ..*refusal
            };
        }
        PolicyDecision {
            allowed: true,
            rule: None,
            offending: None,
            commands: vec![shown],
            message: format!(
                "allowed; a `{stem}` text could not be resolved before run time and was not \
                 checked"
            ),
            nested: Vec::new(),
            ask: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_no_parser_reads_is_unresolved_as_a_whole() {
        let cwd = std::env::temp_dir();
        let policy = Policy::default();
        let d = policy.check_unread("C:\\Windows\\system32\\cmd.exe", "del /q x", &cwd);
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.commands, vec!["?(del /q x)".to_string()]);
        assert!(d.message.contains("`cmd` text"), "{}", d.message);

        let strict = Policy {
            refuse_unresolved: true,
            ..Policy::default()
        };
        let d = strict.check_unread("pwsh.exe", "Remove-Item x", &cwd);
        assert_eq!(d.rule.as_deref(), Some("unresolved"), "{d:?}");
        assert!(d.message.contains("Git Bash"), "{}", d.message);

        let listed = Policy {
            allowed: Some(["git".to_string()].into()),
            ..Policy::default()
        };
        assert!(!listed.check_unread("cmd.exe", "git status", &cwd).allowed);

        let mut blocked = Policy::default();
        blocked.blocked.insert("powershell".into());
        let d = blocked.check_unread("powershell.exe", "dir", &cwd);
        assert_eq!(d.rule.as_deref(), Some("blocklist"), "{d:?}");

        let dirs = Policy {
            dirs: vec![cwd.join("cuba-no-such-root")],
            ..Policy::default()
        };
        let d = dirs.check_unread("cmd.exe", "dir", &cwd);
        assert_eq!(d.rule.as_deref(), Some("allowed_dirs"), "{d:?}");
    }
}
