//! One segment of a spool: its two files (`<start>.out`, `<start>.tags`) and the reading of
//! its stream tags.

use std::fs::File;
use std::io;

use cuba_protocol::Stream;

use super::runs::Run;

/// One tag: `u64 LE cursor | u8 stream`.
pub const TAG_LEN: u64 = 9;

/// A segment's files. Only the segment being written keeps them open: a finished record, or
/// an older segment of a running one, opens them for the read that needs them, so open
/// descriptors never grow with the number of records.
#[derive(Debug)]
pub struct Files {
    pub data: File,
    pub tags: File,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    pub start: u64,
    pub len: u64,
    pub tag_count: u64,
    /// Not carried across an upgrade: the new program writes on in a new segment.
    #[serde(skip)]
    pub files: Option<Files>,
}

fn read_tag(tags: &File, index: u64) -> io::Result<Run> {
    let mut tag = [0u8; TAG_LEN as usize];
    super::at::read_exact_at(tags, &mut tag, index * TAG_LEN)?;
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
pub fn read_runs(seg: &Segment, tags: &File, start: u64, end: u64) -> io::Result<Vec<Run>> {
    let (mut lo, mut hi) = (0, seg.tag_count);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if read_tag(tags, mid)?.start <= start {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut runs = Vec::new();
    let mut i = lo;
    while i < seg.tag_count {
        let run = read_tag(tags, i)?;
        if run.start >= end {
            break;
        }
        runs.push(run);
        i += 1;
    }
    Ok(runs)
}
