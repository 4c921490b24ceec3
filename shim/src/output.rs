//! Fetching a process's output for a reply: everything after `since` when it fits in
//! `max_output`, else its first quarter and last three quarters with a marker between them.

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{OutputRead, ProcState, ProcessInfo, ReadRequest, StreamFilter};

use crate::view::View;

pub const DEFAULT_MAX_OUTPUT: u64 = 64 * 1024;
/// Even when asked, one reply carries at most this much output.
const MAX_MAX_OUTPUT: u64 = 1024 * 1024;

pub fn max_output(asked: Option<u64>) -> u64 {
    asked
        .unwrap_or(DEFAULT_MAX_OUTPUT)
        .clamp(256, MAX_MAX_OUTPUT)
}

pub struct Rendered {
    pub text: String,
    /// Raw bytes left out between head and tail.
    pub truncated: u64,
    pub dropped: u64,
    pub next: u64,
}

async fn read(
    client: &Client,
    id: u64,
    since: u64,
    max: u64,
    stream: StreamFilter,
) -> Result<OutputRead, ClientError> {
    client
        .read(ReadRequest {
            id,
            since: Some(since),
            max_bytes: max as u32,
            stream,
        })
        .await
}

/// Output of `info`'s process from `since`, as the model sees it. `ready` is output the caller
/// already has (from a wait reply, read at the same moment as `info`): used when it covers all.
pub async fn render(
    client: &Client,
    view: &View,
    info: &ProcessInfo,
    since: u64,
    max: u64,
    stream: StreamFilter,
    ready: Option<OutputRead>,
) -> Result<Rendered, ClientError> {
    let total = info.total_bytes();
    let since = since.min(total);
    if let Some(r) = ready.filter(|r| r.start == since && r.next >= total) {
        return Ok(Rendered {
            text: view.render(&r.bytes()),
            truncated: 0,
            dropped: r.dropped,
            next: r.next,
        });
    }
    if total - since <= max {
        // Reads may stop short (at the end of the daemon's memory head): continue until done.
        let mut bytes = Vec::new();
        let (mut cursor, mut dropped) = (since, 0);
        while cursor < total {
            let r = read(client, info.id, cursor, total - cursor, stream).await?;
            if r.next <= cursor {
                break;
            }
            dropped += r.dropped;
            bytes.extend(r.bytes());
            cursor = r.next;
        }
        return Ok(Rendered {
            text: view.render(&bytes),
            truncated: 0,
            dropped,
            next: cursor,
        });
    }
    let head_len = max / 4;
    let tail_len = max - head_len;
    let head = read(client, info.id, since, head_len, stream).await?;
    let tail = read(client, info.id, total - tail_len, tail_len, stream).await?;
    let truncated = tail.start.saturating_sub(head.next);
    let mut text = view.render(&head.bytes());
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("[... {truncated} bytes truncated ...]\n"));
    text.push_str(&view.render(&tail.bytes()));
    Ok(Rendered {
        text,
        truncated,
        dropped: head.dropped,
        next: tail.next,
    })
}

pub fn parse_state(s: &str) -> Result<ProcState, String> {
    let all = [
        ProcState::Running,
        ProcState::WaitingInput,
        ProcState::Exited,
        ProcState::Signaled,
        ProcState::TimedOut,
        ProcState::Killed,
        ProcState::FailedToStart,
        ProcState::Lost,
    ];
    all.into_iter()
        .find(|st| st.as_str() == s.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
            format!("unknown state {s:?}: use one of {}", names.join(", "))
        })
}
