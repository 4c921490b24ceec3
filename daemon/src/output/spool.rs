//! The on-disk spool: a process's full output up to a cap, in segment files.
//!
//! `spool/<id>/` holds `<start>.out` (raw bytes from cursor `start`) and `<start>.tags` (9-byte
//! records `u64 LE cursor | u8 stream`, one where each stretch of a stream begins, and one at each
//! segment's start). The head segment (the first quarter of the cap) is never dropped; after it,
//! segments of an eighth of the cap each, and when there are too many the oldest is deleted and
//! counted as dropped. So `logs` shows the beginning and the end of any run, and a reader that
//! falls behind learns exactly how much it missed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use cuba_protocol::{Chunk, Stream, StreamFilter};

use super::runs::{split_runs, Run};

const TAG_LEN: u64 = 9;

#[derive(Debug)]
struct Segment {
    start: u64,
    len: u64,
    data: File,
    tags: File,
    tag_count: u64,
}

#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    head_cap: u64,
    seg_size: u64,
    max_tail_segs: usize,
    segs: Vec<Segment>,
    written: u64,
    dropped: u64,
    last_stream: Option<Stream>,
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
            dropped: 0,
            last_stream: None,
        }
    }

    /// Reopens the spool of a finished process (after a daemon restart), read-only in practice.
    pub fn open(dir: PathBuf) -> io::Result<Spool> {
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
            let data = File::open(&path)?;
            let tags = File::open(path.with_extension("tags"))?;
            let len = data.metadata()?.len();
            let tag_count = tags.metadata()?.len() / TAG_LEN;
            segs.push(Segment {
                start,
                len,
                data,
                tags,
                tag_count,
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
            dropped: written - kept,
            last_stream: None,
        })
    }

    /// Bytes kept per stream `(stdout, stderr)`, from the tags; dropped bytes count as stdout.
    pub fn stream_bytes(&self) -> (u64, u64) {
        let (mut out, mut err) = (self.dropped, 0);
        for seg in &self.segs {
            let Ok(runs) = read_runs(seg, seg.start, seg.start + seg.len) else {
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

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    fn open_segment(&mut self) -> io::Result<()> {
        if self.segs.is_empty() {
            fs::create_dir_all(&self.dir)?;
        }
        let base = self.dir.join(format!("{:020}", self.written));
        let open = |ext: &str| {
            OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(base.with_extension(ext))
        };
        let seg = Segment {
            start: self.written,
            len: 0,
            data: open("out")?,
            tags: open("tags")?,
            tag_count: 0,
        };
        self.segs.push(seg);
        // Keep the head segment; drop the oldest after it when there are too many.
        if self.segs.len() > self.max_tail_segs + 1 {
            let old = self.segs.remove(1);
            self.dropped += old.len;
            let base = self.dir.join(format!("{:020}", old.start));
            // Already-deleted files are fine: the bytes are gone either way.
            let _ = fs::remove_file(base.with_extension("out"));
            let _ = fs::remove_file(base.with_extension("tags"));
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

    pub fn write(&mut self, stream: Stream, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let full = match self.segs.last() {
                Some(seg) => seg.len >= self.capacity_of(seg),
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
            let n = (cap - seg.len).min(data.len() as u64) as usize;
            if seg.len == 0 || new_run {
                let mut tag = [0u8; TAG_LEN as usize];
                tag[..8].copy_from_slice(&written.to_le_bytes());
                tag[8] = stream_byte(stream);
                seg.tags.write_all(&tag)?;
                seg.tag_count += 1;
            }
            seg.data.write_all(&data[..n])?;
            seg.len += n as u64;
            self.written += n as u64;
            self.last_stream = Some(stream);
            data = &data[n..];
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
        let mut data = vec![0u8; (end - start) as usize];
        seg.data.read_exact_at(&mut data, start - seg.start)?;
        let runs = read_runs(seg, start, end)?;
        Ok(Some((start, end, split_runs(runs, &data, start, filter))))
    }
}

fn read_tag(seg: &Segment, index: u64) -> io::Result<Run> {
    let mut tag = [0u8; TAG_LEN as usize];
    seg.tags.read_exact_at(&mut tag, index * TAG_LEN)?;
    let mut cursor = [0u8; 8];
    cursor.copy_from_slice(&tag[..8]);
    Ok(Run {
        start: u64::from_le_bytes(cursor),
        stream: if tag[8] == 2 {
            Stream::Stderr
        } else {
            Stream::Stdout
        },
    })
}

/// The runs covering `[start, end)`: binary search for the last run at or before `start`,
/// then read forward until `end`.
fn read_runs(seg: &Segment, start: u64, end: u64) -> io::Result<Vec<Run>> {
    let (mut lo, mut hi) = (0, seg.tag_count);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if read_tag(seg, mid)?.start <= start {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut runs = Vec::new();
    let mut i = lo;
    while i < seg.tag_count {
        let run = read_tag(seg, i)?;
        if run.start >= end {
            break;
        }
        runs.push(run);
        i += 1;
    }
    Ok(runs)
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
            s.write(stream, line.as_bytes()).unwrap();
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
    fn drops_the_oldest_middle_and_counts_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::create(dir.path().join("2"), 800); // head 200, segs 100
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for piece in data.chunks(77) {
            s.write(Stream::Stdout, piece).unwrap();
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
}
