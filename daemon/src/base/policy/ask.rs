//! The third decision, `ask`: what runs only once a person approves it. By command pattern (a
//! program and its leading arguments, each word a glob: `git push`, `rm -r*`, `kubectl
//! delete`), by a declared side-effect category, by directory. A pattern applies to every
//! simple command of a text (parse time) and to every exec (where execs are checked); a
//! category and a directory apply to the command as a whole.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What needs a person's approval first.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AskRules {
    /// Patterns as written (`git push`).
    pub commands: Vec<String>,
    /// Side-effect categories (`DELETES_FILES`).
    pub side_effects: BTreeSet<String>,
    /// Directories: a command whose `cwd` lies inside one.
    pub dirs: Vec<PathBuf>,
}

impl AskRules {
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty() && self.side_effects.is_empty() && self.dirs.is_empty()
    }

    /// Both sets of rules: what either asks about, the other does too.
    pub fn union(&self, other: &AskRules) -> AskRules {
        let mut commands = self.commands.clone();
        for c in &other.commands {
            if !commands.contains(c) {
                commands.push(c.clone());
            }
        }
        let mut dirs = self.dirs.clone();
        for d in &other.dirs {
            if !dirs.contains(d) {
                dirs.push(d.clone());
            }
        }
        AskRules {
            commands,
            side_effects: self
                .side_effects
                .union(&other.side_effects)
                .cloned()
                .collect(),
            dirs,
        }
    }

    /// The pattern a command matches, given its program name and arguments (`None`: a word
    /// known only at run time, which could be anything and so matches any word).
    pub fn command(&self, program: &str, args: &[Option<&str>]) -> Option<&str> {
        let name = program.rsplit('/').next().unwrap_or(program);
        self.commands
            .iter()
            .find(|p| matches(p, name, args))
            .map(String::as_str)
    }

    /// The directory a `cwd` lies inside (symlinks and `..` resolved where they can be).
    pub fn dir(&self, cwd: &Path) -> Option<&Path> {
        let real = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        self.dirs
            .iter()
            .find(|d| {
                let root = std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
                real.starts_with(root)
            })
            .map(PathBuf::as_path)
    }

    /// The first declared category that asks, by its name.
    pub fn side_effect(&self, declared: &[String]) -> Option<String> {
        declared
            .iter()
            .map(|d| d.trim().to_ascii_uppercase())
            .find(|d| self.side_effects.contains(d))
    }
}

/// git's global options that take the next word as their value (`git -C DIR push`).
const GIT_VALUED: [&str; 8] = [
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--config-env",
    "--attr-source",
];

/// `args` as a pattern sees them: a program's global options before its subcommand left out
/// (git's: `-C DIR`, `-c K=V`, `--no-pager`, `--git-dir=D` …, which git takes before the
/// subcommand and nowhere else), and every `--` (the end of options changes no word's place
/// in what the program does). A word known only at run time ends the options: it could be
/// the subcommand.
fn past_options<'a>(name: &str, args: &[Option<&'a str>]) -> Vec<Option<&'a str>> {
    let mut rest = args;
    if name == "git" {
        while let Some((Some(word), after)) = rest.split_first() {
            if !word.starts_with('-') || *word == "--" {
                break;
            }
            rest = match GIT_VALUED.contains(word) {
                true => after.get(1..).unwrap_or_default(),
                false => after,
            };
        }
    }
    rest.iter().copied().filter(|a| *a != Some("--")).collect()
}

/// Whether pattern `p` (words, each a glob) matches a program `name` and its `args`: its first
/// word the program's name, each next one the argument in the same place.
fn matches(p: &str, name: &str, args: &[Option<&str>]) -> bool {
    let mut words = p.split_whitespace();
    let Some(first) = words.next() else {
        return false;
    };
    if !glob(first, name) {
        return false;
    }
    let args = past_options(name, args);
    for (i, w) in words.enumerate() {
        match args.get(i) {
            None => return false,
            Some(None) => {}
            Some(Some(a)) if glob(w, a) => {}
            Some(Some(_)) => return false,
        }
    }
    true
}

/// `*` any run of characters, `?` any one; everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative, with one backtrack point: linear in practice, never exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Splits a pattern list: one pattern per `,` or `;` (a pattern has spaces of its own).
pub fn pattern_list(text: &str) -> Vec<String> {
    text.split([',', ';'])
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(commands: &[&str]) -> AskRules {
        AskRules {
            commands: commands.iter().map(|s| s.to_string()).collect(),
            ..AskRules::default()
        }
    }

    #[test]
    fn a_pattern_is_the_program_and_its_leading_arguments() {
        let r = rules(&["git push", "rm -r*", "kubectl delete", "npm publish"]);
        let some = |a: &[&'static str]| a.iter().map(|x| Some(*x)).collect::<Vec<_>>();
        assert_eq!(
            r.command("git", &some(&["push", "origin"])),
            Some("git push")
        );
        assert_eq!(
            r.command("/usr/bin/git", &some(&["push"])),
            Some("git push")
        );
        assert_eq!(r.command("git", &some(&["pull"])), None);
        assert_eq!(r.command("git", &some(&[])), None);
        assert_eq!(r.command("rm", &some(&["-rf", "build"])), Some("rm -r*"));
        assert_eq!(r.command("rm", &some(&["-f", "x"])), None);
        // A word known only at run time could be `push`: asked.
        assert_eq!(r.command("git", &[None, Some("origin")]), Some("git push"));
        assert_eq!(
            r.command("kubectl", &some(&["delete", "pod", "x"])),
            Some("kubectl delete")
        );
    }

    #[test]
    fn git_global_options_and_an_end_of_options_are_looked_past() {
        let r = rules(&["git push", "touch /etc/*"]);
        let some = |a: &[&'static str]| a.iter().map(|x| Some(*x)).collect::<Vec<_>>();
        for args in [
            &["-C", ".", "push"][..],
            &["--no-pager", "push"],
            &["-c", "core.pager=cat", "-p", "push", "origin"],
            &["--git-dir=.git", "--work-tree", "/src", "push"],
            &["--", "push"],
        ] {
            assert_eq!(r.command("git", &some(args)), Some("git push"), "{args:?}");
        }
        assert_eq!(r.command("git", &some(&["-C", "push", "log"])), None);
        assert_eq!(r.command("git", &some(&["log", "--", "push"])), None);
        // A word only known at run time may be the subcommand.
        assert_eq!(
            r.command("git", &[Some("-C"), Some("x"), None]),
            Some("git push")
        );
        assert_eq!(
            r.command("touch", &some(&["--", "/etc/x"])),
            Some("touch /etc/*")
        );
    }

    #[test]
    fn globs_match_as_a_shell_would() {
        assert!(glob("-r*", "-rf"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(glob("ku?ectl", "kubectl"));
        assert!(!glob("git", "gitx"));
    }

    #[test]
    fn lists_and_unions() {
        assert_eq!(
            pattern_list("git  push, rm -r* ;kubectl delete,,"),
            ["git push", "rm -r*", "kubectl delete"]
        );
        let a = rules(&["git push"]);
        let b = AskRules {
            commands: vec!["git push".into(), "npm publish".into()],
            side_effects: ["DELETES_FILES".to_string()].into_iter().collect(),
            dirs: vec![PathBuf::from("/srv")],
        };
        let u = a.union(&b);
        assert_eq!(u.commands, ["git push", "npm publish"]);
        assert_eq!(
            u.side_effect(&["deletes_files".into()]).as_deref(),
            Some("DELETES_FILES")
        );
        assert!(u.dir(Path::new("/srv/app")).is_some());
        assert!(u.dir(Path::new("/srvx")).is_none());
    }
}
