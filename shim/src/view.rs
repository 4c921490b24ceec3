//! The model view of output: what an agent reads instead of the raw bytes. ANSI escapes
//! stripped, carriage-return redraws (progress bars) collapsed to their final state, secrets
//! redacted. The spool keeps the raw bytes; cursors always count raw bytes.

use regex::Regex;

/// Turns raw output into text for a model.
#[derive(Debug, Clone)]
pub struct View {
    strip_ansi: bool,
    redact: Option<Regex>,
}

/// Environment variable names whose values are secrets.
pub const SECRET_NAMES: &str = "(?i)TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL";
/// Shorter values are too likely to occur by chance to be worth hiding.
const MIN_SECRET_LEN: usize = 6;

impl View {
    /// A view that redacts the values of variables in `env` whose names match `names`.
    pub fn new<'a>(
        strip_ansi: bool,
        names: Option<&Regex>,
        env: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> View {
        let mut secrets: Vec<&str> = env
            .into_iter()
            .filter(|(k, v)| names.is_some_and(|n| n.is_match(k)) && v.len() >= MIN_SECRET_LEN)
            .map(|(_, v)| v)
            .collect();
        // Longest first, so a secret that contains another is hidden whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        let redact = if secrets.is_empty() {
            None
        } else {
            let alternation: Vec<String> = secrets.iter().map(|s| regex::escape(s)).collect();
            Regex::new(&alternation.join("|")).ok()
        };
        View { strip_ansi, redact }
    }

    /// The text a model sees for `raw`.
    pub fn render(&self, raw: &[u8]) -> String {
        let text = if self.strip_ansi {
            String::from_utf8_lossy(&strip_escapes(raw)).into_owned()
        } else {
            String::from_utf8_lossy(raw).into_owned()
        };
        let text = collapse_cr(&text);
        match &self.redact {
            Some(re) => re.replace_all(&text, "[REDACTED]").into_owned(),
            None => text,
        }
    }
}

/// Removes terminal escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ST`, DCS/APC/PM/SOS
/// strings, two- and three-byte escapes), keeping every other byte: text, tabs, newlines and
/// carriage returns (those are collapsed later).
pub fn strip_escapes(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != 0x1b {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        i += 1;
        match raw.get(i) {
            Some(b'[') => {
                i += 1;
                while i < raw.len() && !(0x40..=0x7e).contains(&raw[i]) {
                    i += 1;
                }
                i += 1;
            }
            Some(b']' | b'P' | b'X' | b'^' | b'_') => {
                i += 1;
                while i < raw.len() {
                    if raw[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if raw[i] == 0x1b && raw.get(i + 1) == Some(&b'\\') {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            // Character-set designations take one more byte: `ESC ( B`.
            Some(b'(' | b')' | b'*' | b'+' | b'#' | b'%') => i += 2,
            Some(_) => i += 1,
            None => {}
        }
    }
    out
}

/// Applies carriage returns the way a terminal would: `10%\r55%\r100%` shows as `100%`, and a
/// shorter redraw leaves the tail of the longer one (`abcdef\rxy` → `xycdef`). `\r\n` is a
/// line ending.
pub fn collapse_cr(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        if !line.contains('\r') {
            out.push_str(line);
            continue;
        }
        let mut cells: Vec<char> = Vec::new();
        for segment in line.split('\r') {
            for (col, ch) in segment.chars().enumerate() {
                if col < cells.len() {
                    cells[col] = ch;
                } else {
                    cells.push(ch);
                }
            }
        }
        out.extend(cells);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn plain() -> View {
        View::new(true, Some(&Regex::new(SECRET_NAMES).unwrap()), [])
    }

    #[test]
    fn strips_ansi_colours_and_cursor_moves() {
        let v = plain();
        assert_eq!(v.render(b"\x1b[31mred\x1b[0m \x1b[2Kok"), "red ok");
        assert_eq!(v.render(b"\x1b]0;title\x07text"), "text");
        assert_eq!(v.render(b"a\tb\n"), "a\tb\n");
        assert_eq!(
            v.render(b"\x1b[32m10%\x1b[0m\r\x1b[32m100%\x1b[0m\n"),
            "100%\n"
        );
    }

    #[test]
    fn collapses_progress_redraws() {
        assert_eq!(collapse_cr("10%\r55%\r100%\ndone\n"), "100%\ndone\n");
        assert_eq!(collapse_cr("abcdef\rxy"), "xycdef");
        assert_eq!(collapse_cr("a\r\nb\r\n"), "a\nb\n");
    }

    #[test]
    fn redacts_secret_values_only() {
        let names = Regex::new(SECRET_NAMES).unwrap();
        let env = [
            ("GITHUB_TOKEN", "ghp_abcdef123456"),
            ("API_KEY", "k-987654321"),
            ("HOME", "/home/someone"),
            ("SHORT_KEY", "abc"),
        ];
        let v = View::new(true, Some(&names), env);
        let out = v.render(b"token=ghp_abcdef123456 key=k-987654321 home=/home/someone abc");
        assert_eq!(
            out,
            "token=[REDACTED] key=[REDACTED] home=/home/someone abc"
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        assert_eq!(plain().render(b"a\xffb"), "a\u{fffd}b");
    }
}
