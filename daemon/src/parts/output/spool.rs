//! The on-disk spool: a process's full output up to a cap, in segment files.
//!
//! `spool/<id>/` holds `<start>.out` (raw bytes from cursor `start`) and `<start>.tags` (9-byte
//! records `u64 LE cursor | u8 stream`, one where each stretch of a stream begins, and one at each
//! segment's start). The head segment (the first quarter of the cap) is never dropped; after it,
//! segments of an eighth of the cap each, and when there are too many the oldest is deleted and
//! counted as dropped. So `logs` shows the beginning and the end of any run, and a reader that
//! falls behind learns exactly how much it missed.
//!
//! A spool never fails its writer: when the disk is full it stops, counts the bytes it skips
//! (memory still has the latest), says so in the record's notice, and resumes by itself in a
//! new segment once the file system takes bytes again.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cuba_protocol::safe_dir::Dir;
use cuba_protocol::{Chunk, Stream, StreamFilter};

use super::runs::split_runs;
use super::segment::{read_runs, Files, Segment, TAG_LEN};

/// `spool/<id>`: the levels of a spool's directory below the state directory.
const SPOOL_DEPTH: usize = 2;

/// A segment's file: its first byte's offset, 20 digits, and `out` or `tags`.
fn segment_name(start: u64, ext: &str) -> String {
    format!("{start:020}.{ext}")
}

/// How often a stopped spool tries its directory again (on the next output after that).
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Gaps remembered one by one; past this the oldest two are counted as one.
const MAX_GAPS: usize = 64;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Spool {
    dir: PathBuf,
    head_cap: u64,
    seg_size: u64,
    max_tail_segs: usize,
    segs: Vec<Segment>,
    /// The cursor of the next byte (bytes skipped while stopped included).
    written: u64,
    /// Bytes of middle segments deleted to keep the cap.
    evicted: u64,
    last_stream: Option<Stream>,
    /// Stopped (a write failed): when to try again. Not carried across an upgrade: the new
    /// program tries at once.
    #[serde(skip)]
    stopped: Option<Instant>,
    /// How long a stopped spool waits before it tries again.
    retry_after: Duration,
    /// The last write error, as users read it (`no space left on device`).
    error: Option<String>,
    /// Stretches `[start, end)` never written because the spool was stopped.
    gaps: Vec<(u64, u64)>,
}

fn stream_byte(s: Stream) -> u8 {
    match s {
        Stream::Stdout => 1,
        Stream::Stderr => 2,
    }
}

impl Spool {
    /// A new, empty spool in `dir` holding at most about `cap` bytes. The directory is made
    /// with the first segment: a process that prints nothing costs no disk operation.
    pub fn create(dir: PathBuf, cap: u64) -> Spool {
        let head_cap = (cap / 4).max(1);
        let seg_size = (cap / 8).max(1);
        Spool {
            dir,
            head_cap,
            seg_size,
            max_tail_segs: ((cap - head_cap.min(cap)) / seg_size).max(1) as usize,
            segs: Vec::new(),
            written: 0,
            evicted: 0,
            last_stream: None,
            stopped: None,
            retry_after: RETRY_AFTER,
            error: None,
            gaps: Vec::new(),
        }
    }

    /// Reopens the spool of a finished process (after a daemon restart), read-only in practice.
    /// No file stays open.
    pub fn open(dir: PathBuf) -> io::Result<Spool> {
        // `spool/<id>` through a handle: neither it nor a segment may be a link.
        let handle = Dir::open(&dir, SPOOL_DEPTH, false)?;
        let mut segs = Vec::new();
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "out") {
                continue;
            }
            let Some(start) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u64>().ok())
            else {
                continue;
            };
            let len = handle.len_of(&segment_name(start, "out"))?;
            let tag_count = handle.len_of(&segment_name(start, "tags"))? / TAG_LEN;
            segs.push(Segment {
                start,
                len,
                tag_count,
                files: None,
            });
        }
        segs.sort_by_key(|s| s.start);
        let written = segs.last().map_or(0, |s| s.start + s.len);
        let kept: u64 = segs.iter().map(|s| s.len).sum();
        Ok(Spool {
            dir,
            head_cap: 0,
            seg_size: 0,
            max_tail_segs: 0,
            segs,
            written,
            evicted: written - kept,
            last_stream: None,
            stopped: None,
            retry_after: RETRY_AFTER,
            error: None,
            gaps: Vec::new(),
        })
    }

    /// Opens the segment being written again, to append where it ended (after an in-place
    /// upgrade: the files were written by the previous program). Without this each upgrade
    /// would start a new segment, and enough of them would evict bytes well under the cap.
    /// On any mismatch the next write simply starts a new segment.
    pub fn reopen(&mut self) {
        if self.stopped.is_some() || self.error.is_some() {
            return;
        }
        let Some(seg) = self.segs.last() else { return };
        if seg.len >= self.capacity_of(seg) {
            return;
        }
        let start = seg.start;
        let Ok(dir) = Dir::open(&self.dir, SPOOL_DEPTH, false) else {
            return;
        };
        let open = |ext: &str, len: u64| -> io::Result<File> {
            let f = dir.open_append(&segment_name(start, ext))?;
            // What the files hold beyond what the record counts was never acknowledged.
            if f.metadata()?.len() != len {
                f.set_len(len)?;
            }
            Ok(f)
        };
        let files = open("out", seg.len).and_then(|data| {
            let tags = open("tags", seg.tag_count * TAG_LEN)?;
            Ok(Files { data, tags })
        });
        if let (Ok(files), Some(seg)) = (files, self.segs.last_mut()) {
            seg.files = Some(files);
        }
    }

    /// Closes every file: the process is done, reads open what they need.
    pub fn seal(&mut self) {
        for seg in &mut self.segs {
            seg.files = None;
        }
    }

    /// Bytes kept per stream `(stdout, stderr)`, from the tags; dropped bytes count as stdout.
    pub fn stream_bytes(&self) -> (u64, u64) {
        let (mut out, mut err) = (self.dropped(), 0);
        for seg in &self.segs {
            let Ok(runs) = self.with_files(seg, |_, tags| {
                read_runs(seg, tags, seg.start, seg.start + seg.len)
            }) else {
                continue;
            };
            for (i, run) in runs.iter().enumerate() {
                let end = runs.get(i + 1).map_or(seg.start + seg.len, |r| r.start);
                let len = end.saturating_sub(run.start.max(seg.start));
                match run.stream {
                    Stream::Stdout => out += len,
                    Stream::Stderr => err += len,
                }
            }
        }
        (out, err)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the spool directories `dirs` (pruned records'); one never made is no error.
    pub fn remove_all(dirs: &[PathBuf]) {
        for dir in dirs {
            if let Err(e) = std::fs::remove_dir_all(dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("cannot remove {}: {e}", dir.display());
                }
            }
        }
    }

    /// Bytes the spool does not have: deleted to keep the cap, or never written while stopped.
    pub fn dropped(&self) -> u64 {
        self.evicted + self.gaps.iter().map(|(a, b)| b - a).sum::<u64>()
    }

    /// Bytes deleted to keep the cap.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Stretches never written because the spool was stopped.
    pub fn gaps(&self) -> &[(u64, u64)] {
        &self.gaps
    }

    /// What a user should know about this spool: stopped now, or bytes missing from a stop.
    pub fn notice(&self) -> Option<String> {
        let missing: u64 = self.gaps.iter().map(|(a, b)| b - a).sum();
        let error = self.error.as_deref().unwrap_or("write failed");
        match (&self.stopped, missing) {
            (Some(_), n) => Some(format!(
                "spool stopped: {error}; {n} bytes not kept on disk (memory has the latest)"
            )),
            (None, 0) => None,
            (None, n) => Some(format!(
                "spool was stopped ({error}): {n} bytes not kept on disk"
            )),
        }
    }

    /// Why writing stopped, while it is.
    pub fn stopped_by(&self) -> Option<&str> {
        self.stopped
            .as_ref()
            .map(|_| self.error.as_deref().unwrap_or("write failed"))
    }

    /// Runs `f` with a segment's files: its open ones, or opened for this call.
    fn with_files<T>(
        &self,
        seg: &Segment,
        f: impl FnOnce(&File, &File) -> io::Result<T>,
    ) -> io::Result<T> {
        match &seg.files {
            Some(files) => f(&files.data, &files.tags),
            None => {
                let dir = Dir::open(&self.dir, SPOOL_DEPTH, false)?;
                let data = dir.open_read(&segment_name(seg.start, "out"))?;
                let tags = dir.open_read(&segment_name(seg.start, "tags"))?;
                f(&data, &tags)
            }
        }
    }

    fn open_segment(&mut self) -> io::Result<()> {
        // The directories are made if missing (the first segment, or after a stop) and opened
        // from the state directory down without following a link; the segment is created
        // through that handle: in the directories that were checked, or not at all.
        let dir = Dir::open(&self.dir, SPOOL_DEPTH, true)?;
        let open = |ext: &str| dir.create_new(&segment_name(self.written, ext));
        let data = open("out")?;
        let tags = match open("tags") {
            Ok(t) => t,
            Err(e) => {
                let _ = dir.remove(&segment_name(self.written, "out"));
                return Err(e);
            }
        };
        if let Some(last) = self.segs.last_mut() {
            last.files = None;
        }
        self.segs.push(Segment {
            start: self.written,
            len: 0,
            tag_count: 0,
            files: Some(Files { data, tags }),
        });
        // A new segment starts a new run whatever the stream.
        self.last_stream = None;
        // Keep the head segment; drop the oldest after it when there are too many.
        if self.segs.len() > self.max_tail_segs + 1 {
            let old = self.segs.remove(1);
            self.evicted += old.len;
            // Already-deleted files are fine: the bytes are gone either way.
            let _ = dir.remove(&segment_name(old.start, "out"));
            let _ = dir.remove(&segment_name(old.start, "tags"));
        }
        Ok(())
    }

    fn capacity_of(&self, seg: &Segment) -> u64 {
        if seg.start == 0 {
            self.head_cap
        } else {
            self.seg_size
        }
    }

    /// Appends `data`. Never fails: when the file system refuses (a full disk, a file-size
    /// limit), the spool stops, counts what it skips, and tries again on output after
    /// [`RETRY_AFTER`], in a new segment: the bytes in between are a gap readers are told of.
    pub fn write(&mut self, stream: Stream, data: &[u8]) {
        if let Some(retry_at) = self.stopped {
            if Instant::now() < retry_at {
                self.skip(data.len() as u64);
                return;
            }
            match self.open_segment() {
                Ok(()) => {
                    tracing::info!(dir = %self.dir.display(), "spool resumed");
                    self.stopped = None;
                }
                Err(e) => {
                    self.stop(&e);
                    self.skip(data.len() as u64);
                    return;
                }
            }
        }
        let mut rest = data;
        if let Err(e) = self.write_some(stream, &mut rest) {
            if self.stopped.is_none() {
                tracing::warn!(dir = %self.dir.display(), "spool stopped: {e}");
            }
            self.stop(&e);
            self.skip(rest.len() as u64);
        }
    }

    fn stop(&mut self, e: &io::Error) {
        self.error = Some(crate::base::health::reason(e));
        self.stopped = Some(Instant::now() + self.retry_after);
        // The segment written last is never written again: its files may close.
        if let Some(seg) = self.segs.last_mut() {
            seg.files = None;
        }
    }

    /// `n` bytes at the cursor are not kept.
    fn skip(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        let at = self.written;
        match self.gaps.last_mut() {
            Some(gap) if gap.1 == at => gap.1 += n,
            _ => self.gaps.push((at, at + n)),
        }
        if self.gaps.len() > MAX_GAPS {
            let second = self.gaps.remove(1);
            self.gaps[0].1 = second.1;
        }
        self.written += n;
    }

    /// Writes from `data`, advancing it past what the files took.
    fn write_some(&mut self, stream: Stream, data: &mut &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let full = match self.segs.last() {
                Some(seg) => seg.len >= self.capacity_of(seg) || seg.files.is_none(),
                None => true,
            };
            if full {
                self.open_segment()?;
            }
            let new_run = self.last_stream != Some(stream);
            let written = self.written;
            let cap = self.segs.last().map_or(0, |s| self.capacity_of(s));
            let Some(seg) = self.segs.last_mut() else {
                return Err(io::Error::other("spool has no segment"));
            };
            let Some(files) = seg.files.as_mut() else {
                return Err(io::Error::other("spool segment is closed"));
            };
            let n = (cap.saturating_sub(seg.len)).min(data.len() as u64) as usize;
            if seg.len == 0 || new_run {
                let mut tag = [0u8; TAG_LEN as usize];
                tag[..8].copy_from_slice(&written.to_le_bytes());
                tag[8] = stream_byte(stream);
                if let Err(e) = files.tags.write_all(&tag) {
                    // A torn tag would misplace every later one.
                    let _ = files.tags.set_len(seg.tag_count * TAG_LEN);
                    return Err(e);
                }
                seg.tag_count += 1;
            }
            if let Err(e) = files.data.write_all(&data[..n]) {
                // The segment ends at its last whole write: what the file took of this one
                // is cut off, so the file says exactly what `len` says.
                let _ = files.data.set_len(seg.len);
                return Err(e);
            }
            seg.len += n as u64;
            self.written += n as u64;
            self.last_stream = Some(stream);
            *data = &data[n..];
        }
        Ok(())
    }

    /// Bytes from `since` (or from the first kept byte after it) up to `end`, within one
    /// segment: `(start, next, chunks)`. `None` when nothing at or after `since` is kept.
    pub fn read(
        &self,
        since: u64,
        end: u64,
        filter: StreamFilter,
    ) -> io::Result<Option<(u64, u64, Vec<Chunk>)>> {
        let Some(seg) = self.segs.iter().find(|s| s.start + s.len > since) else {
            return Ok(None);
        };
        // Skipping a dropped stretch keeps the size of the window asked for.
        let start = since.max(seg.start);
        let end = (end + (start - since)).min(seg.start + seg.len);
        if start >= end {
            return Ok(None);
        }
        self.with_files(seg, |data_file, tags| {
            let mut data = vec![0u8; (end - start) as usize];
            super::at::read_exact_at(data_file, &mut data, start - seg.start)?;
            let runs = read_runs(seg, tags, start, end)?;
            Ok(Some((start, end, split_runs(runs, &data, start, filter))))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn read_all(spool: &Spool, filter: StreamFilter) -> (Vec<u8>, u64) {
        let (mut out, mut cursor, mut dropped) = (Vec::new(), 0, 0);
        while let Some((start, next, chunks)) = spool.read(cursor, cursor + 1000, filter).unwrap() {
            dropped += start - cursor;
            for c in chunks {
                out.extend(c.data);
            }
            cursor = next;
        }
        (out, dropped)
    }

    #[test]
    fn keeps_everything_under_the_cap_with_stream_tags() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::create(dir.path().join("1"), 8000);
        let mut all = Vec::new();
        let mut errs = Vec::new();
        for i in 0..500u32 {
            let line = format!("{i:03}\n");
            let stream = if i % 5 == 0 {
                Stream::Stderr
            } else {
                Stream::Stdout
            };
            s.write(stream, line.as_bytes());
            all.extend_from_slice(line.as_bytes());
            if stream == Stream::Stderr {
                errs.extend_from_slice(line.as_bytes());
            }
        }
        assert_eq!(read_all(&s, StreamFilter::Both), (all, 0));
        assert_eq!(read_all(&s, StreamFilter::Stderr), (errs, 0));
        // Reopening finds the same bytes.
        let re = Spool::open(dir.path().join("1")).unwrap();
        assert_eq!(
            read_all(&re, StreamFilter::Stderr).0,
            read_all(&s, StreamFilter::Stderr).0
        );
    }

    #[test]
    #[cfg(unix)]
    fn a_segment_planted_as_a_link_is_refused_at_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::create(dir.path().join("4"), 8000);
        s.write(Stream::Stdout, b"bytes");
        s.seal();
        let canary = dir.path().join("canary");
        fs::write(&canary, b"keep").unwrap();
        let out = dir.path().join("4").join(segment_name(0, "out"));
        fs::remove_file(&out).unwrap();
        std::os::unix::fs::symlink(&canary, &out).unwrap();
        let e = Spool::open(dir.path().join("4")).err().unwrap().to_string();
        assert!(e.contains(".out is a symbolic link"), "{e}");
        assert_eq!(fs::read(&canary).unwrap(), b"keep");
    }

    #[test]
    fn drops_the_oldest_middle_and_counts_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::create(dir.path().join("2"), 800); // head 200, segs 100
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for piece in data.chunks(77) {
            s.write(Stream::Stdout, piece);
        }
        let (kept, dropped) = read_all(&s, StreamFilter::Both);
        assert_eq!(kept.len() as u64 + dropped, 5000);
        assert_eq!(s.dropped(), dropped);
        assert!(kept.len() <= 800, "kept {}", kept.len());
        assert_eq!(&kept[..200], &data[..200], "the head is kept");
        assert_eq!(&kept[kept.len() - 100..], &data[4900..], "the tail is kept");
        let files = fs::read_dir(dir.path().join("2")).unwrap().count();
        assert!(files <= 2 * 8, "old segments are deleted ({files} files)");
    }

    #[test]
    fn a_spool_that_cannot_write_stops_counts_the_gap_and_resumes() {
        let dir = tempfile::tempdir().unwrap();
        // The spool's directory would be inside a file: every open fails (ENOTDIR).
        let blocker = dir.path().join("x");
        fs::write(&blocker, b"").unwrap();
        let mut s = Spool::create(blocker.join("3"), 8000);
        s.retry_after = Duration::ZERO;
        s.write(Stream::Stdout, b"lost ");
        s.write(Stream::Stderr, b"also lost ");
        assert!(s.stopped_by().is_some());
        assert_eq!(s.gaps(), [(0, 15)]);
        assert_eq!(s.dropped(), 15);
        let n = s.notice().unwrap();
        // The error names the file that is in the way.
        assert!(n.starts_with("spool stopped: "), "{n}");
        assert!(
            n.contains("x is not a directory") && n.contains("; 15 bytes"),
            "{n}"
        );
        // The file system takes bytes again: the next write resumes in a new segment.
        fs::remove_file(&blocker).unwrap();
        s.write(Stream::Stdout, b"kept");
        assert!(s.stopped_by().is_none());
        let (bytes, dropped) = read_all(&s, StreamFilter::Both);
        assert_eq!((bytes.as_slice(), dropped), (&b"kept"[..], 15));
        let n = s.notice().unwrap();
        assert!(n.starts_with("spool was stopped ("), "{n}");
        assert!(n.contains("not a directory") && n.ends_with("): 15 bytes not kept on disk"));
        // Sealed, it holds no file yet reads the same; reopened, it finds the same bytes.
        s.seal();
        assert_eq!(read_all(&s, StreamFilter::Both).0, b"kept");
        let re = Spool::open(blocker.join("3")).unwrap();
        assert_eq!(read_all(&re, StreamFilter::Both), (b"kept".to_vec(), 15));
    }
}
