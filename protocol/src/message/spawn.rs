//! Starting a process: the spawn request, its side-effect declarations, and `Run` (spawn and
//! wait in one round trip).

use std::ffi::OsString;

use serde::{Deserialize, Serialize};

use super::{Env, RequestToken, TtySize, WaitSpec};

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SpawnRequest {
    /// Shell text, run as `shell -c command`.
    pub command: String,
    /// Working directory; relative paths are taken from the client's cwd. Default: client's cwd.
    #[serde(with = "crate::os_text::opt")]
    pub cwd: Option<OsString>,
    /// Overlaid on the client's environment.
    #[serde(with = "crate::os_text::env")]
    pub env: Env,
    /// Shell to run the command with. Default `/bin/sh`.
    pub shell: Option<String>,
    /// Bytes written to stdin right after the start.
    pub stdin: Option<Vec<u8>>,
    /// Close stdin after `stdin` (or at once): the command sees EOF.
    pub close_stdin: bool,
    /// Hard limit: the tree is stopped (TERM, grace, KILL) and the state becomes `TimedOut`.
    pub timeout_ms: Option<u64>,
    /// Optional label shown in tables.
    pub name: Option<String>,
    /// What the caller says the command does: YieldShell's side-effect category names
    /// (`MAKES_NETWORK_REQUESTS`, `DELETES_FILES`, …; see [`SIDE_EFFECTS`]). Empty: nothing
    /// declared. The daemon refuses unknown names and categories in its blocked set; it does
    /// not verify that a declaration is true.
    pub side_effects: Vec<String>,
    /// Run on a pseudo-terminal of this size instead of pipes: the program sees a terminal
    /// (colours, prompts, full-screen programs). Its output is one stream (stdout).
    pub tty: Option<TtySize>,
    /// Run in the persistent shell session of this name (started on first use), so `cd`,
    /// exports and functions carry over to later commands of the same session.
    pub session: Option<String>,
    /// The client's name for this request: a retry with the same token (after a lost
    /// connection, a daemon restart) gets the first attempt's record instead of a second run.
    /// `None`: no such guarantee (the client repeats the request only if it was never sent).
    #[serde(default)]
    pub token: Option<RequestToken>,
    /// A TCP port for the command, leased to it until it ends and given to it as `PORT` in its
    /// environment ([`ProcessInfo::port`](super::ProcessInfo::port) says which).
    #[serde(default)]
    pub port: Option<PortWish>,
}

/// The port a [`SpawnRequest`] asks for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortWish {
    /// Any free one: not listened on now, nor leased to another running process.
    Auto,
    /// This one, refused (naming the holder) while another process listens on it or holds
    /// its lease.
    Exact(u16),
}

/// YieldShell's side-effect categories, the names a [`SpawnRequest::side_effects`] may use.
/// `NONE` (no meaningful side effect) cannot be combined with another category.
pub const SIDE_EFFECTS: &[&str] = &[
    "NONE",
    "MODIFIES_WORKSPACE_FILES",
    "MODIFIES_PROTECTED_FILES",
    "MODIFIES_OUTSIDE_WORKSPACE",
    "DELETES_FILES",
    "INSTALLS_DEPENDENCIES",
    "CHANGES_SYSTEM_CONFIGURATION",
    "BREAKS_OPERATING_SYSTEM",
    "AFFECTS_PRODUCTION_SERVICES",
    "STOPS_OR_RESTARTS_SERVICES",
    "EXPOSES_SECRETS",
    "CREATES_SECURITY_RISK",
    "CHANGES_NETWORK_CONFIGURATION",
    "MAKES_NETWORK_REQUESTS",
    "RUNS_PRIVILEGED_COMMANDS",
    "USES_DESTRUCTIVE_GIT_OPERATION",
    "CONSUMES_SIGNIFICANT_RESOURCES",
    "GENERATES_EXECUTABLE_CONTENT",
    "BREAKS_OS_USER_SETTINGS",
    "KILLS_AGENT_PROCESS",
    "OTHER",
    "UNKNOWN",
];

/// The canonical name of a side-effect category: `name` trimmed and upper-cased if that is one
/// of [`SIDE_EFFECTS`] (so `makes_network_requests` is accepted), else `None`.
pub fn side_effect_name(name: &str) -> Option<&'static str> {
    let upper = name.trim().to_ascii_uppercase();
    SIDE_EFFECTS.iter().copied().find(|c| *c == upper)
}

/// A spawn and the wait that follows it ([`super::Request::Run`]): the wait runs from cursor 0.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    pub spawn: SpawnRequest,
    pub wait: WaitSpec,
}
