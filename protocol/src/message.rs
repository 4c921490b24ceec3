//! Message types spoken on the socket. Data only: encoding lives in `wire.rs`.
//!
//! bincode carries these, so every type is a plain struct or an externally tagged enum (no
//! `#[serde(flatten)]`, `untagged`, `skip_serializing_if` or `serde_json::Value`). New enum
//! variants go at the end, and any change to a type bumps [`crate::PROTOCOL_VERSION`].

use std::ffi::OsString;
use std::fmt;

use serde::{Deserialize, Serialize};

/// An environment as `(name, value)` pairs. `OsString` so non-UTF-8 values survive the trip.
pub type Env = Vec<(OsString, OsString)>;

/// What kind of program is on the other end of a connection.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// The MCP server `cuba-exec`, on behalf of an agent.
    Mcp,
    /// The human CLI `cubactl`.
    Cli,
    /// Anything else (tests, benchmarks, scripts).
    Other,
}

/// Who a client is. Sent once, in the handshake.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ClientInfo {
    pub kind: ClientKind,
    /// Display name: the MCP `clientInfo.name`, or `cubactl`.
    pub name: String,
    pub pid: u32,
    /// The client's working directory: the default `cwd` of what it spawns.
    pub cwd: OsString,
    /// The client's environment: the base environment of what it spawns.
    pub env: Env,
}

/// Handshake request body (after the fixed-layout version prefix, see `handshake.rs`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub client: ClientInfo,
}

/// Handshake reply body.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub daemon_version: String,
    pub daemon_pid: u32,
}

/// A request with the id its responses will carry. Ids are chosen by the client and only need to
/// be unique among that connection's requests in flight.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RequestFrame {
    pub id: u64,
    pub request: Request,
}

/// A response to the request with the same id. Most requests get exactly one; streaming
/// requests ([`Request::Follow`], [`Request::WatchTable`]) get a series ending with
/// [`Response::End`] (or [`Response::Error`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ResponseFrame {
    pub id: u64,
    pub response: Response,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Start a process. Answered by [`Response::Process`] (also when it failed to start: the
    /// record is then in state `FailedToStart` with the OS reason).
    Spawn(SpawnRequest),
    /// One process's record. Answered by [`Response::Process`].
    Info(IdRequest),
    /// Read output. Answered by [`Response::Output`].
    Read(ReadRequest),
    /// Block until exit / pattern / quiet / timeout. Answered by [`Response::Waited`].
    Wait(WaitRequest),
    /// Write to stdin or close it. Answered by [`Response::Ok`].
    Stdin(StdinRequest),
    /// Signal a process's whole tree. Answered by [`Response::Process`].
    Signal(SignalRequest),
    /// The shared table. Answered by [`Response::List`].
    List(ListRequest),
    /// Stream output as it is produced: [`Response::Output`] frames, then the final
    /// [`Response::Process`] once the process has ended and all output was sent, then `End`.
    Follow(FollowRequest),
    /// Stream the table: a [`Response::List`] now and after every change, until cancelled.
    WatchTable(ListRequest),
    /// Cancel another request of this connection (by its id): it ends with a `Cancelled` error.
    /// Answered by [`Response::Ok`].
    Cancel(u64),
    /// Remove finished records now. Answered by [`Response::Pruned`].
    Prune,
    /// Daemon facts. Answered by [`Response::DaemonStatus`].
    DaemonStatus,
    /// Stop the daemon. Answered by [`Response::Ok`] just before it shuts down.
    Shutdown(ShutdownRequest),
    /// Start a process unless one with the same `name` and command is running already.
    /// Answered by [`Response::Process`] (started) or [`Response::Existing`] (found).
    Ensure(SpawnRequest),
    /// Explain what the daemon's command policy says about this shell text, without running
    /// it. Answered by [`Response::Policy`].
    PolicyCheck(String),
    /// Change the size of a PTY process's terminal (the program gets SIGWINCH). Answered by
    /// [`Response::Ok`].
    Resize(ResizeRequest),
    /// The rendered screen of a PTY process: what a person would see on its terminal.
    /// Answered by [`Response::Screen`].
    Screen(IdRequest),
    /// Start a process and wait for it in one round trip: answered by [`Response::Process`] as
    /// soon as it started (its id, for signals and progress), then by [`Response::Waited`] as
    /// a `Wait` from cursor 0 would be. A refused spawn is one `Error`. Cancelling it ends the
    /// wait, not the process.
    Run(RunRequest),
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Ok,
    Process(ProcessInfo),
    Output(OutputRead),
    Waited(WaitResult),
    List(Vec<ProcessInfo>),
    Pruned(u64),
    DaemonStatus(DaemonStatus),
    /// The last frame of a streaming reply.
    End,
    Error(ProtocolError),
    /// The running process an [`Request::Ensure`] found (nothing was started).
    Existing(ProcessInfo),
    /// The policy's verdict on the text of a [`Request::PolicyCheck`].
    Policy(PolicyDecision),
    /// The screen of a PTY process ([`Request::Screen`]).
    Screen(ScreenView),
}

/// A terminal size in character cells.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtySize {
    pub cols: u16,
    pub rows: u16,
}

impl TtySize {
    /// What a PTY process gets unless the caller says otherwise.
    pub const DEFAULT: TtySize = TtySize {
        cols: 120,
        rows: 40,
    };
    /// Larger sizes are refused: the daemon keeps a screen of this many cells per process.
    pub const MAX_CELLS: u32 = 100_000;
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResizeRequest {
    pub id: u64,
    pub size: TtySize,
}

/// A PTY process's terminal as rendered by a terminal emulator from everything it wrote.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScreenView {
    pub size: TtySize,
    /// One string per row, trailing blanks removed (wide characters take one `char`).
    pub lines: Vec<String>,
    /// Cursor position, 0-based.
    pub cursor_row: u16,
    pub cursor_col: u16,
    /// The program switched to the alternate screen (full-screen programs such as `vim`, `top`).
    pub alternate: bool,
    /// The window title the program set (OSC 0/2), if any.
    pub title: String,
    /// The output cursor this screen reflects: everything before it was rendered, nothing
    /// after. Follow from here to keep a copy of the screen up to date.
    pub cursor: u64,
    /// The screen as the bytes a terminal would need to show it exactly: contents with colours
    /// and attributes, cursor, and input modes (application keys, bracketed paste, …).
    pub formatted: Vec<u8>,
}

impl ScreenView {
    /// The screen as text: rows joined by newlines, blank rows at the bottom left out.
    pub fn text(&self) -> String {
        let used = self
            .lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        self.lines[..used].join("\n")
    }
}

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
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SpawnRequest {
    /// Shell text, run as `shell -c command`.
    pub command: String,
    /// Working directory; relative paths are taken from the client's cwd. Default: client's cwd.
    pub cwd: Option<OsString>,
    /// Overlaid on the client's environment.
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

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRequest {
    pub id: u64,
}

/// Which of the two captured streams a read covers. Cursors always count the combined stream.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamFilter {
    #[default]
    Both,
    Stdout,
    Stderr,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl StreamFilter {
    pub fn admits(self, stream: Stream) -> bool {
        matches!(
            (self, stream),
            (StreamFilter::Both, _)
                | (StreamFilter::Stdout, Stream::Stdout)
                | (StreamFilter::Stderr, Stream::Stderr)
        )
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    pub id: u64,
    /// Return bytes from this cursor on. `None`: the last `max_bytes` bytes (a tail read).
    pub since: Option<u64>,
    /// At most this many bytes (clamped by the daemon to what one frame can carry).
    pub max_bytes: u32,
    pub stream: StreamFilter,
}

/// A run of output from one stream.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub stream: Stream,
    pub data: Vec<u8>,
}

/// Output bytes `[start, next)` of the combined stream (only the admitted stream's bytes when
/// filtered).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputRead {
    /// Cursor of the first byte covered. Greater than the requested `since` when bytes in
    /// between are no longer kept; `dropped` says how many.
    pub start: u64,
    /// Cursor to pass as `since` next time.
    pub next: u64,
    /// Bytes between `since` and `start` that were dropped (spool cap) and cannot be returned.
    pub dropped: u64,
    /// Bytes produced so far in all (the combined stream's length).
    pub total: u64,
    pub chunks: Vec<Chunk>,
}

impl OutputRead {
    /// True when bytes after `next` exist already (the read was cut by `max_bytes`).
    pub fn more(&self) -> bool {
        self.next < self.total
    }

    /// All returned bytes, streams merged in order.
    pub fn bytes(&self) -> Vec<u8> {
        let len = self.chunks.iter().map(|c| c.data.len()).sum();
        let mut out = Vec::with_capacity(len);
        for c in &self.chunks {
            out.extend_from_slice(&c.data);
        }
        out
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WaitRequest {
    pub id: u64,
    /// Output is returned (and `until` matched) from this cursor on. Default: 0.
    pub since: Option<u64>,
    /// A regex; the wait ends when output after `since` matches it.
    pub until: Option<String>,
    /// The wait ends when no output arrived for this long.
    pub quiet_ms: Option<u64>,
    /// The wait ends after this long (the daemon caps it). Never kills.
    pub timeout_ms: u64,
    pub max_bytes: u32,
    pub stream: StreamFilter,
}

/// A spawn and the wait that follows it ([`Request::Run`]); the wait's fields are those of
/// [`WaitRequest`], from cursor 0.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    pub spawn: SpawnRequest,
    pub until: Option<String>,
    pub quiet_ms: Option<u64>,
    pub timeout_ms: u64,
    pub max_bytes: u32,
    pub stream: StreamFilter,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// The process has ended (all it wrote itself is in the output; a grandchild that
    /// outlives it may still add some).
    Exited,
    /// `until` matched; the text is the matching line.
    Matched(String),
    Quiet,
    Timeout,
    /// The process is blocked reading the stdin pipe the daemon holds, and its output has gone
    /// quiet: it waits for an answer (`Stdin`) that nothing else will give.
    WaitingInput,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WaitResult {
    pub reason: WaitReason,
    pub process: ProcessInfo,
    pub output: OutputRead,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct StdinRequest {
    pub id: u64,
    pub data: Vec<u8>,
    /// Close stdin after writing `data`.
    pub eof: bool,
}

/// Signals a client may send. A real signal number exists only inside the daemon.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    Term,
    Kill,
    Int,
    Hup,
    Quit,
    Usr1,
    Usr2,
    Stop,
    Cont,
    /// Any other signal, by number (reported when a process died of, say, SIGSEGV).
    Other(i32),
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalRequest {
    pub id: u64,
    pub signal: Signal,
    /// Follow with SIGKILL to the whole tree if it is still alive after the grace period.
    pub escalate: bool,
    /// Grace period; default: the daemon's (5 s unless configured).
    pub grace_ms: Option<u64>,
    /// Answer only once the process has ended (bounded by the grace period plus a margin).
    pub wait: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRequest {
    pub state: Option<ProcState>,
    /// Owner name (exact match).
    pub owner: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FollowRequest {
    pub id: u64,
    /// Start here; `None`: from the last `backlog` bytes.
    pub since: Option<u64>,
    pub backlog: u32,
    pub stream: StreamFilter,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownRequest {
    /// Stop running processes (gracefully) and shut down. Without it, a daemon with running
    /// processes refuses.
    pub force: bool,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcState {
    Running,
    WaitingInput,
    Exited,
    Signaled,
    TimedOut,
    Killed,
    FailedToStart,
    Lost,
}

impl ProcState {
    pub fn is_finished(self) -> bool {
        !matches!(self, ProcState::Running | ProcState::WaitingInput)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProcState::Running => "running",
            ProcState::WaitingInput => "waiting_input",
            ProcState::Exited => "exited",
            ProcState::Signaled => "signaled",
            ProcState::TimedOut => "timed_out",
            ProcState::Killed => "killed",
            ProcState::FailedToStart => "failed_to_start",
            ProcState::Lost => "lost",
        }
    }
}

impl fmt::Display for ProcState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub kind: ClientKind,
    pub name: String,
    pub pid: u32,
}

/// One row of the process table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Small integer, unique across daemon restarts.
    pub id: u64,
    /// OS pid (0 when the process never started).
    pub pid: u32,
    pub owner: Owner,
    pub name: Option<String>,
    pub command: String,
    /// Working directory, for display.
    pub cwd: String,
    pub state: ProcState,
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<Signal>,
    /// Why it failed to start, or how it was lost.
    pub error: Option<String>,
    /// Unix time in milliseconds.
    pub started_at_ms: u64,
    pub ended_at_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    /// Bytes produced on stdout and stderr (the combined stream's length is their sum).
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Bytes no longer kept anywhere (the spool cap dropped them).
    pub dropped_bytes: u64,
    // `default`: journals written before these fields existed still load.
    #[serde(default)]
    pub kind: ProcKind,
    /// The terminal size of a PTY process; `None` when it runs on pipes.
    #[serde(default)]
    pub tty: Option<TtySize>,
    /// The session a [`ProcKind::Session`] shell is, or a [`ProcKind::InSession`] command ran in.
    #[serde(default)]
    pub session: Option<String>,
    /// Something the caller should know about how the request was carried out (e.g. a session
    /// was started again because its shell had ended).
    #[serde(default)]
    pub notice: Option<String>,
}

/// What a row of the table is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProcKind {
    /// A command run by the shell of its own.
    #[default]
    Command,
    /// The long-lived shell of a persistent session.
    Session,
    /// A command run in a session's shell: its own output, exit code and times; `pid` is the
    /// session shell's.
    InSession,
}

impl ProcKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcKind::Command => "command",
            ProcKind::Session => "session",
            ProcKind::InSession => "in_session",
        }
    }
}

impl ProcessInfo {
    pub fn total_bytes(&self) -> u64 {
        self.stdout_bytes + self.stderr_bytes
    }

    /// Wall time so far (running) or in all (ended), given the current Unix time in ms.
    pub fn elapsed_ms(&self, now_ms: u64) -> u64 {
        self.ended_at_ms
            .unwrap_or(now_ms)
            .saturating_sub(self.started_at_ms)
    }
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
}

/// Error classes that cross the wire; clients map them to exit codes and MCP error texts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No process with that id (or it was pruned).
    NotFound,
    /// The request is malformed or its arguments are invalid.
    BadRequest,
    /// A limit was reached (`max_procs`, in-flight requests, queue sizes).
    Limit,
    /// The request was cancelled by the client.
    Cancelled,
    /// The daemon is shutting down.
    ShuttingDown,
    /// The operation is not possible in the process's current state (e.g. stdin closed).
    InvalidState,
    /// A peer of another uid, or a policy refusal.
    Denied,
    /// Something failed inside the daemon (I/O and the like).
    Internal,
    /// The command policy refused the command (blocklist, allowlist, unparsable text) or its
    /// working directory; the message names the rule and the sub-command.
    Blocked,
}

impl ErrorKind {
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::BadRequest => "BAD_REQUEST",
            ErrorKind::Limit => "LIMIT",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::ShuttingDown => "SHUTTING_DOWN",
            ErrorKind::InvalidState => "INVALID_STATE",
            ErrorKind::Denied => "DENIED",
            ErrorKind::Internal => "INTERNAL",
            ErrorKind::Blocked => "BLOCKED",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.code())]
pub struct ProtocolError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ProtocolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProtocolError {
            kind,
            message: message.into(),
        }
    }
}
