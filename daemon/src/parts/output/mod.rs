//! A process's output: one ordered stream of stdout and stderr bytes, each byte addressed by its
//! cursor (offset in the combined stream).
//!
//! Two stores, one writer: the in-memory head+tail buffer (the first 25 % kept, the last 75 % a
//! ring) answers recent reads without I/O; the on-disk spool (`spool.rs`) keeps up to its cap and
//! answers the rest. Stream tags are kept as *runs*: the cursor where each stretch of one stream
//! begins, so memory per process stays bounded whatever the child writes.

use cuba_protocol::{Chunk, OutputRead, Stream, StreamFilter};

mod at;
mod errors;
mod inline;
mod memory;
mod patterns;
mod runs;
mod segment;
mod spool;

pub use inline::{Inline, INLINE_MAX};
use memory::MemBuf;
pub use spool::Spool;

/// Writes `chunks` in order (a spool that stops skips the rest and counts it).
pub fn write_all(spool: &mut Spool, chunks: &[Chunk]) {
    for chunk in chunks {
        spool.write(chunk.stream, &chunk.data);
    }
}

/// Everything a process wrote, bounded in memory, with the spool behind it.
///
/// The first output of a process stays in memory only until [`Output::spill`] (the supervisor
/// calls it shortly after, and at the end), or until memory would have to drop a byte: creating
/// the spool's files is the slowest step between a short command's output and its reply, so it
/// is done after the reply. From then on every append is written through.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Output {
    mem: MemBuf,
    spool: Option<Spool>,
    /// The spool has every byte written so far and gets each new one as it comes.
    spooling: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// The error lines found in it so far.
    errors: errors::ErrorScan,
}

impl Output {
    pub fn new(buffer_size: usize, spool: Option<Spool>) -> Output {
        Output {
            mem: MemBuf::new(buffer_size),
            spool,
            spooling: false,
            stdout_bytes: 0,
            stderr_bytes: 0,
            errors: errors::ErrorScan::default(),
        }
    }

    /// The output of a record restored from the journal: only its spool remains.
    pub fn restored(spool: Option<Spool>, stdout_bytes: u64, stderr_bytes: u64) -> Output {
        Output {
            mem: MemBuf::new(0),
            spool,
            spooling: true,
            stdout_bytes,
            stderr_bytes,
            errors: errors::ErrorScan::default(),
        }
    }

    pub fn total(&self) -> u64 {
        self.stdout_bytes + self.stderr_bytes
    }

    /// Bytes that no read can return any more: deleted from the spool to keep its cap, or
    /// skipped while it was stopped and gone from memory since.
    pub fn dropped(&self) -> u64 {
        let Some(spool) = &self.spool else { return 0 };
        let total = self.total();
        let missing: u64 = spool
            .gaps()
            .iter()
            .map(|&(a, b)| (b - a) - self.mem.holds(a, b, total))
            .sum();
        spool.evicted() + missing
    }

    /// What the reader of this output should be told (its spool stopped), if anything.
    pub fn notice(&self) -> Option<String> {
        self.spool.as_ref().and_then(Spool::notice)
    }

    /// `row` with this output's live figures: bytes per stream, bytes dropped, the spool's
    /// notice, the error lines found (a restored output has none of its own: the row keeps
    /// those the journal had).
    pub fn counted(&self, mut row: cuba_protocol::ProcessInfo) -> cuba_protocol::ProcessInfo {
        row.stdout_bytes = self.stdout_bytes;
        row.stderr_bytes = self.stderr_bytes;
        row.dropped_bytes = self.dropped();
        row.spool = self.notice();
        if let Some(marks) = self.errors.marks() {
            row.errors = Some(marks.clone());
        }
        row
    }

    /// Why the spool takes no bytes now (a full disk), if it does not.
    pub fn spool_stopped(&self) -> Option<String> {
        self.spool
            .as_ref()
            .and_then(Spool::stopped_by)
            .map(str::to_string)
    }

    /// Carries on an output handed over by an in-place upgrade: the spool appends to its
    /// segment again.
    pub fn reopen(&mut self) {
        if let Some(spool) = &mut self.spool {
            spool.reopen();
        }
    }

    /// All output is in: the spool closes its files.
    pub fn seal(&mut self) {
        self.errors.end();
        if let Some(spool) = &mut self.spool {
            spool.seal();
        }
    }

    pub fn append(&mut self, stream: Stream, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let at = self.total();
        self.errors.feed(data, at);
        // Memory holds every byte up to its size: past that, the spool must have them first.
        if !self.spooling && at + data.len() as u64 > self.mem.capacity() {
            self.spill();
        }
        self.mem.append(stream, data, at);
        if self.spooling {
            self.spool_write(stream, data);
        }
        match stream {
            Stream::Stdout => self.stdout_bytes += data.len() as u64,
            Stream::Stderr => self.stderr_bytes += data.len() as u64,
        }
    }

    /// Output is held in memory that the spool does not have yet.
    pub fn unspooled(&self) -> bool {
        !self.spooling && self.spool.is_some() && self.total() > 0
    }

    /// Writes what only memory holds to the spool, and every later append as it comes.
    pub fn spill(&mut self) {
        if let Some((mut spool, chunks)) = self.take_spill() {
            write_all(&mut spool, &chunks);
            self.end_spill(spool);
        }
    }

    /// The first half of a spill done without holding this output's lock (the caller is the
    /// only appender meanwhile): the spool and what it lacks. `None` when there is nothing to
    /// write (then spooling starts at once). Reads meanwhile are served from memory, which has
    /// every byte.
    pub fn take_spill(&mut self) -> Option<(Spool, Vec<Chunk>)> {
        if self.spooling {
            return None;
        }
        let total = self.total();
        if total == 0 || self.spool.is_none() {
            self.spooling = true;
            return None;
        }
        let chunks = self.mem_chunks();
        self.spool.take().map(|spool| (spool, chunks))
    }

    /// Every byte memory holds, from 0, as chunks of one stream each. Only whole while nothing
    /// was dropped (not spooling yet): memory then has every byte (head, then tail: a read
    /// returns one of them at a time).
    fn mem_chunks(&self) -> Vec<Chunk> {
        let total = self.total();
        let mut chunks = Vec::new();
        let mut at = 0;
        while at < total {
            match self.mem.read(at, total, total, StreamFilter::Both) {
                Some((piece, next)) if next > at => {
                    chunks.extend(piece);
                    at = next;
                }
                // Cannot happen while nothing was dropped; take what there is.
                _ => break,
            }
        }
        chunks
    }

    /// The second half: the spool back, written (or stopped, counting what it skipped).
    pub fn end_spill(&mut self, spool: Spool) {
        self.spooling = true;
        self.spool = Some(spool);
    }

    fn spool_write(&mut self, stream: Stream, data: &[u8]) {
        if let Some(spool) = &mut self.spool {
            spool.write(stream, data);
        }
    }

    /// Up to `max` bytes from `since` (a tail read when `None`). Never duplicates, never skips
    /// silently: bytes that are gone are counted in `dropped`.
    pub fn read(&self, since: Option<u64>, max: u64, filter: StreamFilter) -> OutputRead {
        let total = self.total();
        let max = max.max(1);
        let (since, explicit) = match since {
            Some(s) => (s.min(total), true),
            None => (total.saturating_sub(max), false),
        };
        let end = total.min(since + max);
        let mut read = OutputRead {
            start: since,
            next: since,
            dropped: 0,
            total,
            chunks: Vec::new(),
        };
        if since == total {
            return read;
        }
        if let Some((chunks, next)) = self.mem.read(since, end, total, filter) {
            read.next = next;
            read.chunks = chunks;
            return read;
        }
        let from_spool = self
            .spool
            .as_ref()
            .and_then(|s| match s.read(since, end, filter) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("spool read failed: {e}");
                    None
                }
            });
        let mem_start = self.mem.tail_start(total);
        let (start, next, chunks) = match from_spool {
            // The spool skips a stretch it never got; memory may hold part of it.
            Some(r) if r.0 <= mem_start || r.0 == since => r,
            _ => {
                // Neither store has `since`: resume at the oldest byte memory still holds.
                let start = self.mem.tail_start(total);
                let end = total.min(start + max);
                let (chunks, next) = self
                    .mem
                    .read(start, end, total, filter)
                    .unwrap_or((Vec::new(), end));
                (start, next, chunks)
            }
        };
        read.start = start;
        read.next = next;
        read.dropped = if explicit { start - since } else { 0 };
        read.chunks = chunks;
        read
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::runs::{split_runs, Run};
    use super::*;

    fn text(r: &OutputRead) -> String {
        String::from_utf8(r.bytes()).unwrap()
    }

    /// An in-place upgrade encodes the output, and the new program decodes it and appends on:
    /// however many times, every byte stays readable in order, with its stream, and no
    /// segment is started (and the oldest evicted) just because of an upgrade.
    #[test]
    fn an_output_handed_over_many_times_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::create(dir.path().join("h"), 64 * 1024);
        let mut o = Output::new(400, Some(spool));
        let mut all = Vec::new();
        for i in 0..40u32 {
            let stream = if i % 3 == 0 {
                Stream::Stderr
            } else {
                Stream::Stdout
            };
            let line = format!("{i:04}{}\n", "x".repeat(90));
            o.append(stream, line.as_bytes());
            all.extend_from_slice(line.as_bytes());
            let bytes = cuba_protocol::wire::encode(&o).unwrap();
            o = cuba_protocol::wire::decode(&bytes).unwrap();
            o.reopen();
        }
        assert_eq!(o.dropped(), 0);
        let mut seen = Vec::new();
        let mut at = 0;
        while at < o.total() {
            let r = o.read(Some(at), 1000, StreamFilter::Both);
            assert_eq!((r.start, r.dropped), (at, 0), "{r:?}");
            seen.extend(r.bytes());
            at = r.next;
        }
        assert_eq!(seen, all);
        let (mut errs, mut at) = (0, 0);
        while at < o.total() {
            let r = o.read(Some(at), 1000, StreamFilter::Stderr);
            errs += r.bytes().len();
            at = r.next;
        }
        assert_eq!(errs, 14 * 95);
        // One segment on disk (the head one): each upgrade appended to it.
        let segments = std::fs::read_dir(dir.path().join("h")).unwrap().count();
        assert_eq!(segments, 2, "one .out and one .tags file");
    }

    #[test]
    fn the_spool_is_written_on_spill_or_before_memory_would_drop_a_byte() {
        let dir = tempfile::tempdir().unwrap();
        let spool_dir = dir.path().join("1");
        let spool = Spool::create(spool_dir.clone(), 64 * 1024);
        let mut o = Output::new(400, Some(spool));
        o.append(Stream::Stdout, b"out ");
        o.append(Stream::Stderr, b"err");
        // In memory only: no file yet, and reads are whole.
        assert!(o.unspooled());
        assert!(!spool_dir.exists());
        assert_eq!(
            text(&o.read(Some(0), 1 << 20, StreamFilter::Both)),
            "out err"
        );
        o.spill();
        assert!(!o.unspooled());
        o.append(Stream::Stdout, b" more");
        // What was spilled and what came after are in the spool, tags included.
        let reopened = Spool::open(spool_dir.clone()).unwrap();
        let (chunks, next) = {
            let (_, next, chunks) = reopened.read(0, 12, StreamFilter::Both).unwrap().unwrap();
            (chunks, next)
        };
        assert_eq!(next, 12);
        let streams: Vec<_> = chunks.iter().map(|c| c.stream).collect();
        assert_eq!(streams, [Stream::Stdout, Stream::Stderr, Stream::Stdout]);

        // Without a spill, the spool gets everything before memory drops a byte.
        let spool_dir = dir.path().join("2");
        let spool = Spool::create(spool_dir.clone(), 64 * 1024);
        let mut o = Output::new(400, Some(spool)); // head 100, tail 300
        for i in 0..100u32 {
            o.append(Stream::Stdout, format!("{i:09}\n").as_bytes());
        }
        assert!(!o.unspooled());
        // Memory gives the head; the middle it dropped comes from the spool, nothing lost.
        let r = o.read(Some(0), 1 << 20, StreamFilter::Both);
        assert_eq!((r.start, r.dropped, r.next), (0, 0, 100));
        let r = o.read(Some(100), 1 << 20, StreamFilter::Both);
        assert_eq!((r.start, r.dropped), (100, 0));
        assert!(
            text(&r).starts_with("000000010\n000000011\n"),
            "{}",
            text(&r)
        );
    }

    #[test]
    fn small_output_reads_back_whole_with_stream_tags() {
        let mut o = Output::new(1024, None);
        o.append(Stream::Stdout, b"out1 ");
        o.append(Stream::Stderr, b"err ");
        o.append(Stream::Stdout, b"out2");
        let r = o.read(Some(0), 1 << 20, StreamFilter::Both);
        assert_eq!(text(&r), "out1 err out2");
        assert_eq!((r.start, r.next, r.dropped, r.total), (0, 13, 0, 13));
        assert_eq!(r.chunks.len(), 3);
        let r = o.read(Some(0), 1 << 20, StreamFilter::Stderr);
        assert_eq!(text(&r), "err ");
        assert_eq!(r.next, 13);
        let r = o.read(Some(0), 1 << 20, StreamFilter::Stdout);
        assert_eq!(text(&r), "out1 out2");
    }

    #[test]
    fn memory_keeps_head_and_tail_and_reports_the_gap() {
        let mut o = Output::new(400, None); // head 100, tail 300
        for i in 0..100u32 {
            o.append(Stream::Stdout, format!("{i:09}\n").as_bytes());
        }
        assert_eq!(o.total(), 1000);
        let head = o.read(Some(0), 1000, StreamFilter::Both);
        assert_eq!(head.next, 100, "a read stops at the end of the head");
        let gap = o.read(Some(100), 1000, StreamFilter::Both);
        assert_eq!((gap.start, gap.dropped, gap.next), (700, 600, 1000));
        assert!(text(&gap).ends_with("000000099\n"));
        let tail = o.read(None, 50, StreamFilter::Both);
        assert_eq!((tail.start, tail.next, tail.dropped), (950, 1000, 0));
    }

    #[test]
    fn cursor_reads_never_duplicate_or_skip() {
        let mut o = Output::new(4096, None);
        let mut expect = Vec::new();
        let mut got = Vec::new();
        let mut cursor = 0;
        for i in 0..200u32 {
            let line = format!("line {i}\n");
            let stream = if i % 3 == 0 {
                Stream::Stderr
            } else {
                Stream::Stdout
            };
            o.append(stream, line.as_bytes());
            expect.extend_from_slice(line.as_bytes());
            if i % 7 == 0 {
                let r = o.read(Some(cursor), 64, StreamFilter::Both);
                assert_eq!(r.dropped, 0);
                got.extend(r.bytes());
                cursor = r.next;
            }
        }
        loop {
            let r = o.read(Some(cursor), 64, StreamFilter::Both);
            if r.next == cursor {
                break;
            }
            got.extend(r.bytes());
            cursor = r.next;
        }
        // The memory holds 4096 bytes: whatever was read before eviction arrived intact.
        assert_eq!(&got[..], &expect[..got.len()]);
        assert_eq!(cursor, o.total());
    }

    #[test]
    fn split_runs_honours_run_boundaries() {
        let runs = [
            Run {
                start: 0,
                stream: Stream::Stdout,
            },
            Run {
                start: 3,
                stream: Stream::Stderr,
            },
            Run {
                start: 5,
                stream: Stream::Stdout,
            },
        ];
        let c = split_runs(runs, b"bcdef", 1, StreamFilter::Both);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].data, b"bc");
        assert_eq!(c[1].data, b"de");
        assert_eq!(c[2].data, b"f");
    }
}
