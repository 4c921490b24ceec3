//! Stream tags as runs: the cursor where each stretch of one stream begins, and splitting bytes
//! into per-stream chunks by them.

use cuba_protocol::{Chunk, Stream, StreamFilter};

/// Where a stretch of one stream begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Run {
    pub start: u64,
    pub stream: Stream,
}

/// Splits `data` (the bytes at cursors `[at, at + data.len())`) into chunks by `runs` (sorted,
/// the first starting at or before `at`), keeping the streams `filter` admits.
pub fn split_runs(
    runs: impl IntoIterator<Item = Run>,
    data: &[u8],
    at: u64,
    filter: StreamFilter,
) -> Vec<Chunk> {
    let end = at + data.len() as u64;
    let mut out: Vec<Chunk> = Vec::new();
    let mut runs = runs.into_iter().peekable();
    while let Some(run) = runs.next() {
        let run_end = runs.peek().map_or(end, |next| next.start.min(end));
        let from = run.start.max(at);
        if from >= run_end || !filter.admits(run.stream) {
            continue;
        }
        let bytes = &data[(from - at) as usize..(run_end - at) as usize];
        match out.last_mut() {
            Some(last) if last.stream == run.stream => last.data.extend_from_slice(bytes),
            _ => out.push(Chunk {
                stream: run.stream,
                data: bytes.to_vec(),
            }),
        }
    }
    out
}
