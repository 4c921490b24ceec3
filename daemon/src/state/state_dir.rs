//! Where the daemon keeps its state: the layout of the state directory in one place.

use std::path::PathBuf;

/// The state directory: journal, audit log, instance token, per-process spools and scripts.
#[derive(Debug, Clone)]
pub struct StateDir(PathBuf);

impl StateDir {
    pub fn new(root: PathBuf) -> StateDir {
        StateDir(root)
    }

    /// `journal.jsonl`: one line per start, end and prune.
    pub fn journal(&self) -> PathBuf {
        self.0.join("journal.jsonl")
    }

    /// `audit.jsonl`: one line per policy decision and process end.
    pub fn audit(&self) -> PathBuf {
        self.0.join("audit.jsonl")
    }

    /// The token that tells this state directory's processes from any other daemon's.
    pub fn instance(&self) -> PathBuf {
        self.0.join("instance")
    }

    /// The spool of process `id`.
    pub fn spool(&self, id: u64) -> PathBuf {
        self.0.join("spool").join(id.to_string())
    }

    /// The script file of process `id` (command text too long for an argument, or a command
    /// run in a session). Unix only: Windows passes the text on the command line.
    #[cfg(unix)]
    pub fn script(&self, id: u64) -> PathBuf {
        self.0.join("scripts").join(format!("{id}.sh"))
    }
}
