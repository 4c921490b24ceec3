//! Questions put to the person: a command or an exec the policy says to `ask` about (held in
//! `awaiting_approval` until someone answers), and a password a program asks for through the
//! askpass helper. Answers come from a person only: `cubactl`, or an MCP client's elicitation.

use serde::{Deserialize, Serialize};

/// What an ask is about.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskKind {
    /// A command the policy says to ask about, not started yet.
    Command,
    /// A program a running command's tree is about to run, held at its exec.
    Exec,
    /// A password a program asks for (sudo, ssh, git) through the askpass helper.
    Password,
    /// A host a sandboxed command wants to reach through the daemon's proxy, which no rule
    /// names (`network = "proxy"`, `unknown = "ask"`); `what` is `HOST:PORT`.
    Network,
    /// The MCP client that started a running command has gone (`client_gone = "ask"`):
    /// approving stops the command, denying (or no answer) keeps it. It runs on meanwhile.
    ClientGone,
}

impl AskKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AskKind::Command => "command",
            AskKind::Exec => "exec",
            AskKind::Password => "password",
            AskKind::Network => "network",
            AskKind::ClientGone => "client_gone",
        }
    }

    /// Whether a process is held for it (`awaiting_approval`): not for a password, which a
    /// running program waits for, nor for a gone client, which leaves its command running.
    pub fn holds(self) -> bool {
        !matches!(self, AskKind::Password | AskKind::ClientGone)
    }
}

/// One unanswered question about a process.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// The ask's number, unique in the daemon (`cubactl approve 7 --ask 3` when a process has
    /// more than one).
    pub id: u64,
    pub kind: AskKind,
    /// The command text, the program and arguments of the exec, or the password prompt.
    pub what: String,
    /// Why it is asked: the rule (`ask_commands: git push`), or the genuine program asking for
    /// a password, its path and command line (``/usr/bin/sudo `sudo -A apt update` ``).
    pub rule: String,
    /// The process that asked (the one held at its exec, or the askpass helper's parent); 0
    /// for a command not started.
    pub pid: u32,
    /// Where it would run.
    pub cwd: String,
    /// Unix time in milliseconds.
    pub asked_at_ms: u64,
    /// When an unanswered ask is denied (`approval_timeout`).
    pub deadline_ms: u64,
}

/// Approve a process's pending ask. Answered by [`super::Response::Process`]: the record after
/// the answer (running, or still held by another ask).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ApproveRequest {
    /// The process.
    pub id: u64,
    /// Which of its asks; `None`: its only one.
    pub ask: Option<u64>,
    /// Remember the approval: the same rule is not asked about again in `dir`.
    pub always: bool,
    /// Where a remembered approval holds (and below); `None`: the ask's working directory.
    pub dir: Option<String>,
}

/// Deny a process's pending ask. Answered by [`super::Response::Process`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct DenyRequest {
    pub id: u64,
    pub ask: Option<u64>,
    /// Why: told to the model.
    pub reason: Option<String>,
}

/// A remembered approval (`approvals.toml`): what is not asked about again, where.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Remembered {
    /// The rule it answers (`ask_commands: git push`).
    pub rule: String,
    /// Where it holds, and below; `None`: anywhere.
    pub dir: Option<String>,
    /// Who approved (`alice (uid 1000)`), through which channel (`cubactl`, `elicitation
    /// through claude-code`), and when (Unix ms).
    pub by: String,
    pub channel: String,
    pub at_ms: u64,
}

/// A process with an ask pending, for `cubactl approvals`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The process's id, owner and command.
    pub id: u64,
    pub owner: String,
    pub command: String,
    pub ask: Ask,
}

/// What [`super::Request::Approvals`] answers: every pending ask, and every remembered
/// approval (numbered from 1 in file order, as `cubactl approvals forget N` takes them).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Approvals {
    pub pending: Vec<Pending>,
    pub remembered: Vec<Remembered>,
    /// The file the remembered ones live in.
    pub file: String,
    /// How the file differs from what the daemon uses, when it was edited by hand since the
    /// daemon read it (`cubactl daemon reload` applies it); empty when it does not.
    pub unconfirmed: Vec<String>,
}

/// Forget remembered approvals: the `index`th (from 1), or every one for `rule`. Answered by
/// [`super::Response::Approvals`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum ForgetRequest {
    Index(u32),
    Rule(String),
    All,
}

/// From the askpass helper: the password `prompt` asks for. Answered by
/// [`super::Response::Secret`] once a person answered (or the ask was refused or timed out).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SecretAsk {
    pub prompt: String,
}

/// A person's answer to a password ask (`cubactl answer ID`). `secret: None` refuses to
/// answer: the program gets no password. Answered by [`super::Response::Ok`]. Its `Debug`
/// leaves the secret out.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq)]
pub struct SecretAnswer {
    pub id: u64,
    pub ask: Option<u64>,
    pub secret: Option<Vec<u8>>,
}

/// The answer to a [`SecretAsk`]: the password, or why there is none. Its `Debug` leaves the
/// secret out.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq)]
pub enum Secret {
    Given(Vec<u8>),
    Refused(String),
}

impl std::fmt::Debug for SecretAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretAnswer")
            .field("id", &self.id)
            .field("ask", &self.ask)
            .field("secret", &self.secret.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Secret::Given(_) => f.write_str("Given(<hidden>)"),
            Secret::Refused(why) => f.debug_tuple("Refused").field(why).finish(),
        }
    }
}
