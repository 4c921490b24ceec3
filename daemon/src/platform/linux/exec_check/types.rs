//! What the daemon learns of one exec, and what it answers when it refuses one; what it asks
//! of a tree's Unix socket rule.

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
    /// The thread that made the call.
    pub pid: i32,
    /// The path the caller gave.
    pub path: String,
    /// The file it names.
    pub target: Option<Target>,
    /// What the kernel runs for it without another exec: the interpreters of its `#!` lines,
    /// the script's own first.
    pub interpreters: Vec<Target>,
    /// The interpreter the ELF image at the end names (`PT_INTERP`: the dynamic loader), which
    /// the kernel maps too.
    pub elf_interpreter: Option<std::sync::Arc<Target>>,
    /// What a program that runs another without an exec of its own (the dynamic loader, or a
    /// program built like it) is given: every file its arguments name.
    pub runs: Vec<Run>,
    /// Such a program whose arguments could not all be read: what it runs is not known.
    pub runs_unknown: bool,
    /// Whether the caller is a shell, once the rules asked (an allowlist governs them).
    pub shell_caller: std::cell::Cell<Option<bool>>,
    /// The caller's arguments (the first few, shortened), where the rules need them: an `ask`
    /// pattern names the program, or it runs the tool it is called as (`busybox rm`).
    pub argv: Option<Vec<String>>,
    /// The arguments the image at the end of a `#!` chain gets, where they differ.
    pub image_argv: Option<Vec<String>>,
}

/// A file a loader-like program was given, and the arguments from it on.
#[derive(Debug)]
pub struct Run {
    pub target: Target,
    pub argv: Vec<String>,
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
        self.target
            .iter()
            .chain(&self.interpreters)
            .chain(self.elf_interpreter.as_deref())
    }

    /// The image at the end of the `#!` chain: what runs with the arguments.
    pub fn image(&self) -> Option<&Target> {
        self.interpreters.last().or(self.target.as_ref())
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

/// A socket file: its device, inode, and when it was made (its birth time in nanoseconds
/// where the filesystem keeps one, else its last inode change): an inode number given again
/// to a new file is not the file a tree made.
pub type SocketFile = (u64, u64, u64);

/// What a tree's Unix socket rule is asked (`crate::parts::unix_sockets`).
#[derive(Debug, Clone, Copy)]
pub enum SocketAsk<'a> {
    /// A connect to the socket file `path` (absolute, links resolved), which is `id`.
    Connect {
        path: &'a std::path::Path,
        id: SocketFile,
    },
    /// A connect to the abstract name (without its leading NUL).
    ConnectAbstract(&'a [u8]),
    /// A bind that makes the socket file `name` in directory `dir` (absolute, links
    /// resolved).
    Bind {
        dir: &'a std::path::Path,
        name: &'a std::ffi::OsStr,
    },
}

/// A socket the tree made itself: connecting to it is allowed from then on.
#[derive(Debug, Clone, Copy)]
pub enum Made<'a> {
    /// A socket file.
    File(SocketFile),
    /// An abstract name (without its leading NUL).
    Name(&'a [u8]),
}
