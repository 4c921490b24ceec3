//! The daemon itself: its status, shutting it down, and the policy's verdict on a command.

use serde::{Deserialize, Serialize};

/// What the command policy decided about a piece of shell text (or a working directory).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PolicyDecision {
    pub allowed: bool,
    /// The rule that refused it: `blocklist`, `allowlist`, `unresolved`, `parse` or
    /// `allowed_dirs`. `None` when allowed.
    pub rule: Option<String>,
    /// The simple command (or directory) that tripped the rule.
    pub offending: Option<String>,
    /// Every simple command found in the text, after unwrapping wrappers and `sh -c` strings.
    /// Commands whose name cannot be known before run time are shown as `?(text)`.
    pub commands: Vec<String>,
    /// One sentence for a human or an agent: what was decided and why.
    pub message: String,
    /// The shell texts it followed, in the order found: `-c` strings, scripts on a shell's
    /// stdin or in a process substitution, command substitutions, `eval` text.
    #[serde(default)]
    pub nested: Vec<String>,
    /// Allowed, but only once a person approves: the rule that asks (`ask_commands: git push`,
    /// `ask_dirs: /srv/prod`, `ask_side_effects: DELETES_FILES`).
    #[serde(default)]
    pub ask: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownRequest {
    /// Stop running processes (gracefully) and shut down. Without it, a daemon with running
    /// processes refuses.
    pub force: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct DaemonStatus {
    pub daemon_version: String,
    pub protocol_version: u32,
    pub pid: u32,
    pub started_at_ms: u64,
    pub socket: String,
    pub state_dir: String,
    pub clients: u32,
    pub running: u32,
    pub total: u32,
    pub max_procs: u32,
    /// Where the daemon runs: `linux`, `macos`; `x86_64`, `aarch64`; its host name.
    pub os: String,
    pub arch: String,
    pub hostname: String,
    /// The shell that runs commands (`sh -c TEXT`).
    pub shell: String,
    /// What the daemon could not do as it should (a full disk: spools stopped, log lines or
    /// journal entries not written), one line each; empty when all is well.
    pub notices: Vec<String>,
    /// When the daemon last re-executed itself in place (`cubactl daemon upgrade`), and how
    /// many times this pid has done so; `started_at_ms` stays the first start.
    pub upgraded_at_ms: Option<u64>,
    pub upgrades: u32,
    /// Why the last upgrade did not happen, until one does (also among the notices).
    pub upgrade_failed: Option<String>,
    /// How processes are supervised, and why: `cgroup v2 at …` (with the controllers or
    /// cgroup v1 hierarchies limits go through), or `process groups + /proc tree walk: …`.
    #[serde(default)]
    pub supervision: String,
    /// Whether every exec in a command's tree is checked by the daemon before it happens:
    /// `on (seccomp user notification…)`, or `unavailable (why)`, or `off (exec_checks = "off")`.
    #[serde(default)]
    pub exec_checks: String,
    /// What a command started now is held to by the OS sandbox, one line per part: writes,
    /// reads (the masks), network (the proxy's rules), Unix sockets, signals.
    #[serde(default)]
    pub sandbox: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct UpgradeRequest {
    /// The program to run; default: the path the daemon was started from.
    pub binary: Option<String>,
}
