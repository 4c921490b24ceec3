//! The bounded in-memory buffer of a process's output: the first quarter kept (head), the last
//! three quarters a ring (tail).

use std::collections::VecDeque;

use cuba_protocol::{Chunk, Stream, StreamFilter};

use super::runs::{split_runs, Run};

/// The bounded in-memory buffer: bytes `[0, head.len())` and `[tail_start, total)`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct MemBuf {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    head_runs: Vec<Run>,
    tail: VecDeque<u8>,
    tail_runs: VecDeque<Run>,
}

impl MemBuf {
    /// How many bytes it holds before it drops any.
    pub fn capacity(&self) -> u64 {
        (self.head_cap + self.tail_cap) as u64
    }

    pub fn new(size: usize) -> MemBuf {
        let head_cap = size / 4;
        MemBuf {
            head_cap,
            tail_cap: size - head_cap,
            head: Vec::new(),
            head_runs: Vec::new(),
            tail: VecDeque::new(),
            tail_runs: VecDeque::new(),
        }
    }

    pub fn append(&mut self, stream: Stream, mut data: &[u8], mut at: u64) {
        if self.head.len() < self.head_cap {
            let n = (self.head_cap - self.head.len()).min(data.len());
            if self.head_runs.last().map(|r| r.stream) != Some(stream) {
                self.head_runs.push(Run { start: at, stream });
            }
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
            at += n as u64;
        }
        if data.is_empty() || self.tail_cap == 0 {
            return;
        }
        if self.tail_runs.back().map(|r| r.stream) != Some(stream) {
            self.tail_runs.push_back(Run { start: at, stream });
        }
        if data.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend(data[data.len() - self.tail_cap..].iter().copied());
        } else {
            let excess = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..excess);
            self.tail.extend(data.iter().copied());
        }
        // Runs wholly before the ring's first byte are no longer needed.
        let tail_start = at + data.len() as u64 - self.tail.len() as u64;
        while self.tail_runs.len() >= 2 && self.tail_runs[1].start <= tail_start {
            self.tail_runs.pop_front();
        }
    }

    /// Bytes from `since` up to `end` and the cursor after them, if `since` is in memory (the
    /// read may stop short, at the end of the head).
    pub fn read(
        &self,
        since: u64,
        end: u64,
        total: u64,
        filter: StreamFilter,
    ) -> Option<(Vec<Chunk>, u64)> {
        let head_len = self.head.len() as u64;
        if since < head_len {
            let end = end.min(head_len);
            let data = &self.head[since as usize..end as usize];
            let chunks = split_runs(self.head_runs.iter().copied(), data, since, filter);
            return Some((chunks, end));
        }
        let tail_start = total - self.tail.len() as u64;
        if since < tail_start {
            return None;
        }
        let (a, b) = self.tail.as_slices();
        let from = (since - tail_start) as usize;
        let to = (end - tail_start) as usize;
        let data: Vec<u8> = if to <= a.len() {
            a[from..to].to_vec()
        } else if from >= a.len() {
            b[from - a.len()..to - a.len()].to_vec()
        } else {
            [&a[from..], &b[..to - a.len()]].concat()
        };
        let chunks = split_runs(self.tail_runs.iter().copied(), &data, since, filter);
        Some((chunks, end))
    }

    pub fn tail_start(&self, total: u64) -> u64 {
        total - self.tail.len() as u64
    }

    /// How many bytes of `[start, end)` it holds, `total` having been written.
    pub fn holds(&self, start: u64, end: u64, total: u64) -> u64 {
        let overlap = |a: u64, b: u64| end.min(b).saturating_sub(start.max(a));
        overlap(0, self.head.len() as u64) + overlap(self.tail_start(total), total)
    }
}
