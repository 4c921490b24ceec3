//! What the daemon learns of one exec, and what it answers when it refuses one.

use std::fs::File;
use std::path::PathBuf;

use cuba_protocol::ExecBlocked;

/// A file an exec would run.
#[derive(Debug)]
pub struct Target {
    /// Its path, links resolved.
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mode: u32,
    /// Open for reading, where the daemon may read it (for `#!` and copies).
    pub file: Option<File>,
}

/// One exec, as the daemon found it before the kernel goes on.
#[derive(Debug)]
pub struct Exec {
    pub pid: i32,
    /// The path the caller gave.
    pub path: String,
    /// The file it names; `None` when there is none (the exec fails by itself).
    pub target: Option<Target>,
    /// The interpreters of its `#!` lines, the script's own first.
    pub interpreters: Vec<Target>,
    /// Another thread can write the caller's memory: the path may change after the check.
    pub shared_memory: bool,
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
