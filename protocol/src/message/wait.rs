//! Waiting for a process: what ends a wait, and what it returns.

use serde::{Deserialize, Serialize};

use super::{OutputRead, ProcessInfo, StreamFilter};

/// When a wait ends and how much output its reply carries: the same for a [`WaitRequest`] and
/// the wait of a [`super::RunRequest`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WaitSpec {
    /// A regex; the wait ends when output after `since` matches it.
    pub until: Option<String>,
    /// The wait ends when no output arrived for this long.
    pub quiet_ms: Option<u64>,
    /// The wait ends after this long (the daemon caps it). Never kills.
    pub timeout_ms: u64,
    pub max_bytes: u32,
    pub stream: StreamFilter,
}

impl WaitSpec {
    /// Until the process exits (or waits for input), at most `timeout_ms`, with up to
    /// `max_bytes` of output.
    pub fn exit(timeout_ms: u64, max_bytes: u32) -> WaitSpec {
        WaitSpec {
            until: None,
            quiet_ms: None,
            timeout_ms,
            max_bytes,
            stream: StreamFilter::Both,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WaitRequest {
    pub id: u64,
    /// Output is returned (and `until` matched) from this cursor on. Default: 0.
    pub since: Option<u64>,
    pub spec: WaitSpec,
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
    /// The process is held until a person answers an ask (see [`ProcessInfo::asks`]).
    AwaitingApproval,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WaitResult {
    pub reason: WaitReason,
    pub process: ProcessInfo,
    pub output: OutputRead,
}
