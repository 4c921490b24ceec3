//! Output: streams, cursor reads and following.

use serde::{Deserialize, Serialize};

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
pub struct FollowRequest {
    pub id: u64,
    /// Start here; `None`: from the last `backlog` bytes.
    pub since: Option<u64>,
    pub backlog: u32,
    pub stream: StreamFilter,
}
