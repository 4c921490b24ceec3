//! Privileges by a person's approval. Where a tree runs with `no_new_privs` (the exec checks
//! under a daemon that is not root), a setuid program in it (`sudo`, `pkexec`, `su`) cannot
//! gain anything and fails. A command whose parsed text runs one is asked about before it
//! starts instead: approved, that one tree runs without the exec checks (the parse-time check
//! still applies) and its password goes to the person through askpass. In the sandbox it is
//! refused: Landlock requires `no_new_privs`, and the sandbox stays on.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The setuid or setgid programs the simple commands `commands` (as the policy found them)
/// start: each one's first word, found in `path` (or by its own path, from `cwd`).
pub fn programs(commands: &[String], path: Option<&str>, cwd: &Path) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for command in commands.iter().filter(|c| !c.starts_with("?(")) {
        let Some(word) = command.split_whitespace().next() else {
            continue;
        };
        let file = match word.contains('/') {
            true => Some(cwd.join(word)),
            false => path.and_then(|p| in_path(word, p)),
        };
        let setuid = file
            .and_then(|f| std::fs::metadata(f).ok())
            .is_some_and(|m| m.is_file() && m.permissions().mode() & 0o6000 != 0);
        if setuid && !found.iter().any(|f| f == word) {
            found.push(word.to_string());
        }
    }
    found
}

fn in_path(name: &str, path: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|f| f.is_file())
}

/// The rule the person is asked about: the programs, and plainly what approving gives up.
pub fn rule(programs: &[String]) -> String {
    format!(
        "setuid: {}. Approved, this one command runs without the exec checks and may gain the \
         privileges {} grants; a password it asks for comes to you",
        programs.join(", "),
        match programs.len() {
            1 => "it",
            _ => "they",
        }
    )
}

/// Why a setuid program cannot run in the sandbox.
pub fn refused_in_sandbox(programs: &[String]) -> String {
    format!(
        "`{}` is a setuid program, and the sandbox keeps every command from gaining privileges \
         (Landlock needs no_new_privs): run it in a terminal of your own, or ask the user to",
        programs.join("`, `")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn setuid_programs_are_found_by_name_and_path() {
        let t = tempfile::tempdir().unwrap();
        let bin = t.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for (name, mode) in [("su-ish", 0o4755), ("plain", 0o755)] {
            std::fs::write(bin.join(name), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(mode))
                .unwrap();
        }
        let path = bin.display().to_string();
        let commands = [
            "su-ish -A apt-get install x".to_string(),
            "plain".to_string(),
            "?($cmd)".to_string(),
            "./bin/su-ish".to_string(),
        ];
        let found = programs(&commands, Some(&path), t.path());
        assert_eq!(found, ["su-ish", "./bin/su-ish"]);
        assert!(programs(&commands[1..2], Some(&path), t.path()).is_empty());
        assert!(rule(&found).contains("without the exec checks"));
    }
}
