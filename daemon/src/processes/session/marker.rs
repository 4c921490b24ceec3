//! Command boundaries in a session shell's output: markers (`\x1e` + `CUBA` + the session's
//! nonce + `B<id>` / `E<id>:<status>` + `\x1e`) found anywhere in a stream, across reads and
//! after partial lines, never shown.

/// A marker's text after the prefix: `E` + a u64 + `:` + an i32, with room to spare.
const MAX_MARKER_BODY: usize = 48;
/// The byte that opens and closes a marker.
pub const SEP: u8 = 0x1e;

/// Finds markers in one stream, across reads.
#[derive(Default)]
pub struct Scanner {
    /// The start of what may be a marker, cut by the end of a read.
    carry: Vec<u8>,
}

pub enum Piece<'a> {
    Data(&'a [u8]),
    Begin(u64),
    End(u64, i32),
}

fn parse_marker(body: &[u8]) -> Option<Piece<'static>> {
    let text = std::str::from_utf8(body).ok()?;
    if let Some(id) = text.strip_prefix('B') {
        return Some(Piece::Begin(id.parse().ok()?));
    }
    let (id, status) = text.strip_prefix('E')?.split_once(':')?;
    Some(Piece::End(id.parse().ok()?, status.parse().ok()?))
}

impl Scanner {
    /// The stream closed: what was held back as a possible marker start is data after all.
    pub fn flush(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.carry)
    }

    /// Splits `input` (after what was carried) into data and markers, in order.
    pub fn feed(&mut self, prefix: &[u8], input: &[u8], mut out: impl FnMut(Piece<'_>)) {
        let joined;
        let data: &[u8] = if self.carry.is_empty() {
            input
        } else {
            let mut j = std::mem::take(&mut self.carry);
            j.extend_from_slice(input);
            joined = j;
            &joined
        };
        let mut i = 0;
        while i < data.len() {
            let Some(at) = data[i..].iter().position(|b| *b == SEP).map(|p| p + i) else {
                out(Piece::Data(&data[i..]));
                return;
            };
            if at > i {
                out(Piece::Data(&data[i..at]));
            }
            let rest = &data[at..];
            if rest.len() < prefix.len() {
                if prefix.starts_with(rest) {
                    self.carry = rest.to_vec();
                    return;
                }
                out(Piece::Data(&data[at..at + 1]));
                i = at + 1;
                continue;
            }
            if !rest.starts_with(prefix) {
                out(Piece::Data(&data[at..at + 1]));
                i = at + 1;
                continue;
            }
            let body = &rest[prefix.len()..];
            match body.iter().take(MAX_MARKER_BODY).position(|b| *b == SEP) {
                Some(end) => match parse_marker(&body[..end]) {
                    Some(marker) => {
                        out(marker);
                        i = at + prefix.len() + end + 1;
                    }
                    None => {
                        out(Piece::Data(&data[at..at + 1]));
                        i = at + 1;
                    }
                },
                None if body.len() < MAX_MARKER_BODY => {
                    self.carry = rest.to_vec();
                    return;
                }
                None => {
                    out(Piece::Data(&data[at..at + 1]));
                    i = at + 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(prefix: &[u8], reads: &[&[u8]]) -> Vec<String> {
        let mut s = Scanner::default();
        let mut out = Vec::new();
        let mut data = Vec::new();
        for r in reads {
            s.feed(prefix, r, |p| match p {
                Piece::Data(d) => data.extend_from_slice(d),
                Piece::Begin(id) => {
                    out.push(format!("data:{}", String::from_utf8_lossy(&data)));
                    data.clear();
                    out.push(format!("begin:{id}"));
                }
                Piece::End(id, st) => {
                    out.push(format!("data:{}", String::from_utf8_lossy(&data)));
                    data.clear();
                    out.push(format!("end:{id}:{st}"));
                }
            });
        }
        data.extend(s.flush());
        out.push(format!("data:{}", String::from_utf8_lossy(&data)));
        out
    }

    const P: &[u8] = b"\x1eCUBAab12";

    #[test]
    fn markers_are_found_in_one_read_and_across_reads() {
        let whole: &[u8] = b"x\x1eCUBAab12B7\x1ehello\x1eCUBAab12E7:3\x1ey";
        let want = vec!["data:x", "begin:7", "data:hello", "end:7:3", "data:y"];
        assert_eq!(run(P, &[whole]), want);
        // Cut at every position: the same pieces.
        for cut in 0..whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(run(P, &[a, b]), want, "cut at {cut}");
        }
        // One byte at a time.
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(run(P, &bytes), want);
    }

    #[test]
    fn lookalikes_are_data() {
        let cases: &[&[u8]] = &[
            b"a\x1eb",
            b"\x1eCUBAzz99B1\x1e",
            b"\x1eCUBAab12X1\x1e",
            b"\x1eCUBAab12B\x1e",
            b"\x1eCUBAab12E1\x1e",
        ];
        for case in cases {
            let got = run(P, &[case]);
            assert_eq!(
                got,
                vec![format!("data:{}", String::from_utf8_lossy(case))],
                "{case:?}"
            );
        }
        // A prefix cut at the end of the stream stays carried (the rest may come).
        let mut s = Scanner::default();
        s.feed(P, b"ok\x1eCUB", |_| {});
        assert_eq!(s.carry, b"\x1eCUB");
    }

    #[test]
    fn partial_lines_keep_their_bytes() {
        let got = run(P, &[b"\x1eCUBAab12B1\x1eno newline\x1eCUBAab12E1:0\x1e"]);
        assert_eq!(
            got,
            vec!["data:", "begin:1", "data:no newline", "end:1:0", "data:"]
        );
    }
}
