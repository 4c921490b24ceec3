//! Printing a process's output: raw bytes, bytes with ANSI escapes stripped, or JSON lines;
//! reading the last N lines; and turning `Follow` frames into printed output.

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::Result;
use cuba_protocol::client::Client;
use cuba_protocol::{Chunk, OutputRead, ProcessInfo, ReadRequest, Response, Stream, StreamFilter};
use serde_json::json;

/// How often a fast producer's dropped bytes are reported.
const NOTE_EVERY: Duration = Duration::from_secs(1);

/// How output bytes are printed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// As the process wrote them.
    Raw,
    /// With ANSI escape sequences (colours, cursor moves) removed.
    Plain,
    /// One JSON object per chunk: `{"stream": "stdout", "text": "…"}`.
    Json,
}

/// Where printed output goes. `split`: stderr chunks to our stderr (as `run` does); otherwise
/// everything to stdout.
pub struct Sink {
    mode: Mode,
    split: bool,
    strip: [Stripper; 2],
    /// The last byte printed was not a newline.
    mid_line: bool,
    /// Dropped bytes not reported yet, and when the last report was made: a fast producer
    /// gets one note a second, not one per frame.
    dropped: u64,
    noted: Option<Instant>,
}

impl Sink {
    pub fn new(mode: Mode, split: bool) -> Sink {
        Sink {
            mode,
            split,
            strip: [Stripper::default(), Stripper::default()],
            mid_line: false,
            dropped: 0,
            noted: None,
        }
    }

    /// Ends a half-printed line on a terminal, so a status line that follows starts afresh
    /// (a pipe gets the bytes exactly as the process wrote them), and reports dropped bytes
    /// not reported yet.
    pub fn finish_line(&mut self) -> io::Result<()> {
        if self.mid_line && self.mode != Mode::Json && io::stdout().is_terminal() {
            self.mid_line = false;
            io::stdout().lock().write_all(b"\n")?;
        }
        self.note_dropped()
    }

    pub fn chunks(&mut self, chunks: &[Chunk]) -> io::Result<()> {
        for c in chunks {
            self.chunk(c.stream, &c.data)?;
        }
        Ok(())
    }

    fn chunk(&mut self, stream: Stream, data: &[u8]) -> io::Result<()> {
        let name = match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        let to_stderr = self.split && stream == Stream::Stderr;
        let bytes = match self.mode {
            Mode::Raw => data.to_vec(),
            Mode::Plain => self.strip[usize::from(stream == Stream::Stderr)].feed(data),
            Mode::Json => {
                let text = String::from_utf8_lossy(data);
                let mut line = json!({ "stream": name, "text": text }).to_string();
                line.push('\n');
                line.into_bytes()
            }
        };
        if let (Some(&last), false) = (bytes.last(), to_stderr) {
            self.mid_line = last != b'\n';
        }
        if to_stderr {
            let mut err = io::stderr().lock();
            err.write_all(&bytes)?;
            err.flush()
        } else {
            let mut out = io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()
        }
    }

    /// Says that bytes were dropped (spool cap) before these: at most once a second.
    pub fn dropped(&mut self, read: &OutputRead) -> io::Result<()> {
        self.dropped += read.dropped;
        if self.noted.is_none_or(|t| t.elapsed() >= NOTE_EVERY) {
            self.note_dropped()?;
        }
        Ok(())
    }

    fn note_dropped(&mut self) -> io::Result<()> {
        let n = std::mem::take(&mut self.dropped);
        if n == 0 {
            return Ok(());
        }
        self.noted = Some(Instant::now());
        if self.mode == Mode::Json {
            writeln!(io::stdout().lock(), "{}", json!({ "dropped": n }))
        } else {
            let note =
                format!("[{n} bytes of output were dropped here: the spool keeps the newest]");
            writeln!(io::stderr().lock(), "{note}")
        }
    }

    /// Handles one `Follow` frame: prints output; gives the final row when the process ended.
    pub fn follow_frame(&mut self, frame: Response) -> Result<Option<ProcessInfo>> {
        match frame {
            Response::Output(read) => {
                self.dropped(&read)?;
                self.chunks(&read.chunks)?;
                Ok(None)
            }
            Response::Process(info) => Ok(Some(info)),
            other => anyhow::bail!("cubad sent an unexpected frame while following: {other:?}"),
        }
    }
}

/// Removes ANSI escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \`, and
/// two-byte escapes), keeping state across chunk boundaries.
#[derive(Default)]
pub struct Stripper {
    state: Esc,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Esc {
    #[default]
    Text,
    Escape,
    Csi,
    Osc,
    OscEscape,
}

impl Stripper {
    pub fn feed(&mut self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len());
        for &b in data {
            self.state = match (self.state, b) {
                (Esc::Text, 0x1b) => Esc::Escape,
                (Esc::Text, _) => {
                    out.push(b);
                    Esc::Text
                }
                (Esc::Escape, b'[') => Esc::Csi,
                (Esc::Escape, b']') => Esc::Osc,
                (Esc::Escape, _) => Esc::Text,
                (Esc::Csi, 0x40..=0x7e) => Esc::Text,
                (Esc::Csi, _) => Esc::Csi,
                (Esc::Osc, 0x07) => Esc::Text,
                (Esc::Osc, 0x1b) => Esc::OscEscape,
                (Esc::Osc, _) => Esc::Osc,
                (Esc::OscEscape, b'\\') => Esc::Text,
                (Esc::OscEscape, _) => Esc::Osc,
            };
        }
        out
    }
}

/// The last `lines` lines of a process's output (of one stream, when filtered), and the cursor
/// to follow from. Reads a growing window from the end until it holds enough lines.
pub async fn last_lines(
    client: &Client,
    id: u64,
    lines: usize,
    stream: StreamFilter,
) -> Result<(Vec<Chunk>, OutputRead)> {
    let mut max: u32 = 64 * 1024;
    loop {
        let read = client
            .read(ReadRequest {
                id,
                since: None,
                max_bytes: max,
                stream,
            })
            .await?;
        let newlines = read
            .chunks
            .iter()
            .flat_map(|c| c.data.iter())
            .filter(|b| **b == b'\n')
            .count();
        let whole = read.start == 0 || read.next - read.start < u64::from(max);
        if lines == 0
            || newlines > lines
            || whole
            || max >= cuba_protocol::wire::MAX_OUTPUT_PER_FRAME
        {
            let chunks = keep_last_lines(read.chunks.clone(), lines);
            return Ok((chunks, read));
        }
        max = max
            .saturating_mul(4)
            .min(cuba_protocol::wire::MAX_OUTPUT_PER_FRAME);
    }
}

/// Cuts `chunks` to their last `lines` lines (a final line without `\n` counts as one).
pub fn keep_last_lines(mut chunks: Vec<Chunk>, lines: usize) -> Vec<Chunk> {
    if lines == 0 {
        return Vec::new();
    }
    let ends_with_newline = chunks
        .iter()
        .rev()
        .find(|c| !c.data.is_empty())
        .is_some_and(|c| c.data.last() == Some(&b'\n'));
    // The newline that ends the part cut away, counted from the end.
    let mut wanted = if ends_with_newline { lines + 1 } else { lines };
    for ci in (0..chunks.len()).rev() {
        for bi in (0..chunks[ci].data.len()).rev() {
            if chunks[ci].data[bi] == b'\n' {
                wanted -= 1;
                if wanted == 0 {
                    chunks[ci].data.drain(..=bi);
                    return chunks.split_off(ci);
                }
            }
        }
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(stream: Stream, s: &str) -> Chunk {
        Chunk {
            stream,
            data: s.as_bytes().to_vec(),
        }
    }

    fn text(chunks: &[Chunk]) -> String {
        chunks
            .iter()
            .map(|c| String::from_utf8_lossy(&c.data).into_owned())
            .collect()
    }

    #[test]
    fn last_lines_cross_chunks() {
        let c = vec![
            chunk(Stream::Stdout, "a\nb\n"),
            chunk(Stream::Stderr, "c\n"),
            chunk(Stream::Stdout, "d\n"),
        ];
        assert_eq!(text(&keep_last_lines(c.clone(), 2)), "c\nd\n");
        assert_eq!(text(&keep_last_lines(c.clone(), 3)), "b\nc\nd\n");
        assert_eq!(text(&keep_last_lines(c.clone(), 9)), "a\nb\nc\nd\n");
        assert_eq!(text(&keep_last_lines(c, 0)), "");
        let open = vec![chunk(Stream::Stdout, "a\nb\nprompt: ")];
        assert_eq!(text(&keep_last_lines(open, 1)), "prompt: ");
    }

    #[test]
    fn ansi_is_stripped_across_chunks() {
        let mut s = Stripper::default();
        let mut out = s.feed(b"\x1b[1;3");
        out.extend(s.feed(b"1mred\x1b[0m \x1b]0;title\x07done"));
        assert_eq!(String::from_utf8_lossy(&out), "red done");
    }
}
