//! Message types spoken on the socket. Data only: encoding lives in `wire.rs`.
//!
//! bincode carries these, so every type is a plain struct or an externally tagged enum (no
//! `#[serde(flatten)]`, `untagged`, `skip_serializing_if` or `serde_json::Value`). New enum
//! variants go at the end, and any change to a type bumps [`crate::PROTOCOL_VERSION`]. One file
//! per topic; this one has the frames and the two enums that name every request and response.

mod access;
mod ask;
mod budget;
mod control;
mod daemon;
mod error;
mod event;
mod hello;
mod output;
mod process;
mod spawn;
mod terminal;
mod token;
mod wait;

pub use access::*;
pub use ask::*;
pub use budget::*;
pub use control::*;
pub use daemon::*;
pub use error::*;
pub use event::*;
pub use hello::*;
pub use output::*;
pub use process::*;
pub use spawn::*;
pub use terminal::*;
pub use token::*;
pub use wait::*;

use serde::{Deserialize, Serialize};

/// A request with the id its responses will carry. Ids are chosen by the client and only need to
/// be unique among that connection's requests in flight.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RequestFrame {
    pub id: u64,
    pub request: Request,
}

/// A response to the request with the same id. Most requests get exactly one; streaming
/// requests ([`Request::Follow`], [`Request::WatchTable`], [`Request::Events`]) get a series ending with
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
    /// Re-execute the daemon in place (same pid) from `binary`, handing every running process,
    /// its pipes, terminal, output and timers to the new program. Refused, with the reason and
    /// the old daemon still serving, when the new binary cannot take the hand-over. On success
    /// the connection closes without a reply: the client reconnects and reads
    /// [`DaemonStatus::upgraded_at_ms`].
    Upgrade(UpgradeRequest),
    /// A person approves a process's pending ask. Refused from inside any process tree the
    /// daemon started (only a person approves). Answered by [`Response::Process`].
    Approve(ApproveRequest),
    /// A person denies a process's pending ask, with a reason the model is told. Refused from
    /// inside any process tree the daemon started. Answered by [`Response::Process`].
    Deny(DenyRequest),
    /// Every pending ask and remembered approval. Answered by [`Response::Approvals`].
    Approvals,
    /// Forget remembered approvals. Refused from inside a process tree. Answered by
    /// [`Response::Approvals`].
    Forget(ForgetRequest),
    /// From the askpass helper, inside a process's tree: ask the person for a password.
    /// Answered by [`Response::Secret`] once answered, refused or timed out.
    AskSecret(SecretAsk),
    /// A person's answer to a password ask. Refused from inside a process tree. Answered by
    /// [`Response::Ok`].
    AnswerSecret(SecretAnswer),
    /// Read `approvals.toml` and `tokens.toml` again (a hand edit takes effect only this way,
    /// or at a restart), and compare the settings file with what the daemon runs with.
    /// Refused from inside a process tree. Answered by [`Response::Reloaded`].
    Reload,
    /// Make a bearer token of the HTTP endpoint. Refused from inside a process tree.
    /// Answered by [`Response::TokenMade`].
    TokenCreate(TokenCreate),
    /// Revoke a bearer token by name. Refused from inside a process tree. Answered by
    /// [`Response::Ok`].
    TokenRevoke(String),
    /// Every bearer token (never the tokens themselves). Answered by [`Response::Tokens`].
    TokenList,
    /// What a presented bearer token is (by its SHA-256 in hex), for the HTTP endpoint.
    /// Answered by [`Response::Token`].
    TokenCheck(String),
    /// Stop the HTTP endpoint of this pid (TERM), once the daemon sees that the pid runs
    /// `cuba-exec`. Refused from inside a process tree. Answered by [`Response::Ok`], or
    /// `NotFound`.
    HttpStop(u32),
    /// Whether this connection may do a person's verb the client carries out itself.
    /// Answered by [`Response::Ok`], or refused from inside a process tree.
    Authorize(Verb),
    /// The event log: one [`Response::Events`] batch, or with `follow` a stream of them (the
    /// backlog, then each new batch) until cancelled, then `End`. A confined caller sees only
    /// the events of its own processes.
    Events(EventsRequest),
    /// Watch a running process's output for a pattern: each new matching line is an event.
    /// Answered by [`Response::Ok`].
    Notify(NotifyRequest),
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Ok,
    Process(ProcessInfo),
    Output(OutputRead),
    Waited(WaitResult),
    List(Listing),
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
    /// Connection level (request id 0): the daemon closes this connection now (it was idle).
    /// It stopped reading before sending this and has answered every request it read, so a
    /// request still unanswered was never seen: the client may send it again on a new
    /// connection, whatever it was.
    Closing {
        reason: String,
    },
    /// Pending asks and remembered approvals ([`Request::Approvals`], [`Request::Forget`]).
    Approvals(Approvals),
    /// The answer to a [`Request::AskSecret`].
    Secret(Secret),
    /// What a [`Request::Reload`] found changed.
    Reloaded(Changes),
    /// A token a [`Request::TokenCreate`] made.
    TokenMade(TokenMade),
    /// The tokens ([`Request::TokenList`]).
    Tokens(TokenList),
    /// What a [`Request::TokenCheck`] found.
    Token(TokenVerdict),
    /// An [`Request::Upgrade`] accepted: the daemon hands over now; what the new program
    /// will read differently from the settings files.
    Upgrading(Changes),
    /// Events of the log ([`Request::Events`]).
    Events(EventBatch),
}
