//! What the daemon learns of one exec, and what it answers when it refuses one.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use cuba_protocol::ExecBlocked;

/// A file an exec would run.
#[derive(Debug)]
pub struct Target {
    /// Its file name, links resolved: what the blocklist and the allowlist match.
    pub name: String,
    /// The path it was opened by (shown where the file itself no longer says).
    pub opened: PathBuf,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mode: u32,
    /// The open file: for reading where `readable` (for `#!` lines and copies), else a path.
    pub file: File,
    pub readable: bool,
}

impl Target {
    /// What the file is, whatever its name: device and inode.
    pub fn id(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// Its path, links resolved (read when a refusal names it, not for every exec).
    pub fn path(&self) -> PathBuf {
        std::fs::read_link(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
            .unwrap_or_else(|_| self.opened.clone())
    }

    pub fn is_regular(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }
}

/// One exec, as the daemon found it before the kernel goes on.
#[derive(Debug, Default)]
pub struct Exec {
    pub pid: i32,
    /// The path the caller gave.
    pub path: String,
    /// The file it names; `None` when there is none (the exec fails by itself).
    pub target: Option<Target>,
    /// The interpreters of its `#!` lines, the script's own first.
    pub interpreters: Vec<Target>,
    /// What a program that runs another without an exec of its own is told to run: the
    /// program the dynamic loader is given, the applet of a multi-call binary (`busybox rm`).
    pub runs: Vec<Target>,
    pub applet: Option<String>,
    /// Whether the caller is a shell, once the rules asked (an allowlist governs them).
    pub shell_caller: std::cell::Cell<Option<bool>>,
    /// Its arguments (the first few, shortened), where the rules need them: an `ask` pattern
    /// names the program.
    pub argv: Option<Vec<String>>,
}

/// What the rules say of an exec.
#[derive(Debug)]
pub enum Verdict {
    Allow,
    Refuse(Refusal),
    /// Only once a person approves: the rule that asks (`ask_commands: git push`).
    Ask(String),
}

/// What became of an exec put to the person.
#[derive(Debug)]
pub enum AskStart {
    /// Held: the answer comes later, through the reply given.
    Held,
    /// Goes on at once (approved already for this process, or a remembered approval).
    Allow,
    Refuse(Refusal),
}

impl Exec {
    /// Every file the kernel runs for this exec: the target, then its interpreters.
    pub fn files(&self) -> impl Iterator<Item = &Target> {
        self.target.iter().chain(&self.interpreters)
    }
}

/// An exec refused.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub rule: &'static str,
    pub program: String,
    pub message: String,
    pub errno: i32,
}

impl Refusal {
    pub fn report(self, pid: i32, argv: Vec<String>, killed: bool) -> ExecBlocked {
        ExecBlocked {
            program: self.program,
            argv,
            rule: self.rule.to_string(),
            message: self.message,
            pid: pid as u32,
            killed,
        }
    }
}

/// An exec whose path could not be read from its caller's memory: refused.
pub fn unreadable(pid: i32, argv: Vec<String>) -> ExecBlocked {
    ExecBlocked {
        program: argv.first().cloned().unwrap_or_default(),
        argv,
        rule: "unreadable".to_string(),
        message: "the daemon could not read what the exec names, so it refused it".to_string(),
        pid: pid as u32,
        killed: false,
    }
}
