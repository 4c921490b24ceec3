//! A short output kept in the journal instead of a spool: most commands print a few lines, and
//! a spool's directory and two files (three inodes, made and later removed) cost more than the
//! command. The runs are written as one journal line once all output is in, and read back by a
//! restarted daemon.

use cuba_protocol::{Chunk, Stream};
use serde::{Deserialize, Serialize};

use super::memory::MemBuf;
use super::Output;

/// Most bytes of output kept in the journal; more goes to the spool as before.
pub const INLINE_MAX: u64 = 8 * 1024;

/// The whole output of a finished process, as runs of one stream each.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Inline(Vec<InlineRun>);

/// One run: its bytes as text where they are UTF-8, else as hex.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
struct InlineRun {
    #[serde(default, skip_serializing_if = "is_false")]
    err: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hex: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl InlineRun {
    fn of(chunk: Chunk) -> InlineRun {
        let err = chunk.stream == Stream::Stderr;
        match String::from_utf8(chunk.data) {
            Ok(text) => InlineRun {
                err,
                text: Some(text),
                hex: None,
            },
            Err(e) => {
                let hex = e.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
                InlineRun {
                    err,
                    text: None,
                    hex: Some(hex),
                }
            }
        }
    }

    fn bytes(&self) -> Vec<u8> {
        if let Some(t) = &self.text {
            return t.as_bytes().to_vec();
        }
        let hex = self.hex.as_deref().unwrap_or("").as_bytes();
        hex.chunks(2)
            .filter_map(|p| std::str::from_utf8(p).ok())
            .filter_map(|p| u8::from_str_radix(p, 16).ok())
            .collect()
    }
}

impl Output {
    /// The whole output, if it is short enough for the journal and only memory has it (a
    /// spool that has it already keeps it).
    pub fn inline(&self) -> Option<Inline> {
        let total = self.total();
        if self.spooling || total == 0 || total > INLINE_MAX || total > self.mem.capacity() {
            return None;
        }
        let runs = self.mem_chunks().into_iter().map(InlineRun::of).collect();
        Some(Inline(runs))
    }

    /// The output of a finished record restored from the journal's copy.
    pub fn from_inline(inline: &Inline) -> Output {
        let runs: Vec<(Stream, Vec<u8>)> = inline
            .0
            .iter()
            .map(|r| {
                (
                    if r.err {
                        Stream::Stderr
                    } else {
                        Stream::Stdout
                    },
                    r.bytes(),
                )
            })
            .collect();
        let size: usize = runs.iter().map(|(_, b)| b.len()).sum();
        let mut out = Output {
            // All of it in the head (a quarter of the size), so that one read returns it all;
            // the buffers grow with what is appended, not with the size.
            mem: MemBuf::new(4 * size.max(1)),
            spool: None,
            spooling: false,
            stdout_bytes: 0,
            stderr_bytes: 0,
            errors: Default::default(),
        };
        for (stream, bytes) in runs {
            out.append(stream, &bytes);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use cuba_protocol::StreamFilter;

    use super::*;

    fn output() -> Output {
        Output::new(1024, None)
    }

    #[test]
    fn a_short_output_comes_back_from_its_journal_copy_byte_for_byte() {
        let mut out = output();
        out.append(Stream::Stdout, b"hi\n");
        out.append(Stream::Stderr, &[0xff, 0x00, b'x']);
        out.append(Stream::Stdout, "é\n".as_bytes());
        let inline = out.inline().expect("short enough");
        let json = serde_json::to_string(&inline).expect("serialises");
        assert!(json.contains("hi\\n"), "{json}");
        let back: Inline = serde_json::from_str(&json).expect("parses");
        let restored = Output::from_inline(&back);
        assert_eq!((restored.stdout_bytes, restored.stderr_bytes), (6, 3));
        for filter in [
            StreamFilter::Both,
            StreamFilter::Stdout,
            StreamFilter::Stderr,
        ] {
            let a = out.read(Some(0), 100, filter);
            let b = restored.read(Some(0), 100, filter);
            assert_eq!(a.chunks, b.chunks, "{filter:?}");
            assert_eq!((a.next, b.dropped), (b.next, 0));
        }
    }

    #[test]
    fn long_empty_or_spooled_outputs_are_not_kept_inline() {
        let mut out = output();
        assert_eq!(out.inline(), None, "nothing to keep");
        out.append(Stream::Stdout, &[b'a'; 1000]);
        assert!(out.inline().is_some());
        out.append(Stream::Stdout, &[b'a'; 100]);
        assert_eq!(out.inline(), None, "more than memory holds");
        let mut big = Output::new(64 * 1024, None);
        big.append(Stream::Stdout, &vec![b'a'; INLINE_MAX as usize + 1]);
        assert_eq!(big.inline(), None, "more than the journal takes");
    }
}
