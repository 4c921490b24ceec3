//! One shell word, statically: its value after quote removal (when it does not depend on run
//! time), and the command text hidden inside it (`$( )`, backticks, `${x:-$(..)}`, `$(( ))`).

use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::ParserOptions;

/// What can be known about a word before it runs.
#[derive(Debug, Clone, Default)]
pub struct Arg {
    /// The word as written.
    pub raw: String,
    /// Its value after quote and escape removal; `None` when an expansion or substitution makes
    /// it depend on run time.
    pub value: Option<String>,
    /// Unquoted glob, brace or extglob characters: the shell may turn it into other words.
    pub pattern: bool,
    /// A process substitution (`<(…)`): the path of what its commands write.
    pub script: Option<Script>,
}

/// A script a shell will read (on its stdin, or from a file that is a process substitution).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Script {
    /// Exactly this text.
    Text(String),
    /// Not known before run time, and why.
    Unseen(&'static str),
}

impl Arg {
    /// A literal word (used for the implicit `echo` of `xargs`).
    pub fn literal(text: &str) -> Arg {
        Arg {
            raw: text.to_string(),
            value: Some(text.to_string()),
            pattern: false,
            script: None,
        }
    }

    /// The program name this word runs as a command: the basename of its static value.
    pub fn command_name(&self) -> Option<String> {
        if self.pattern {
            return None;
        }
        let value = self.value.as_deref()?;
        let base = value.rsplit('/').next().unwrap_or(value);
        (!base.is_empty()).then(|| base.to_string())
    }
}

/// Variables whose value is exactly known where a word is read (`a=rm; $a x`).
pub type Consts = std::collections::HashMap<String, String>;

/// Analyses `raw`; command texts found inside it are appended to `nested`; `$NAME` /
/// `${NAME}` of a constant in `consts` is its value.
pub fn analyse_with(raw: &str, nested: &mut Vec<String>, consts: &Consts) -> Result<Arg, String> {
    let pieces = word::parse(raw, &ParserOptions::default()).map_err(|e| e.to_string())?;
    let mut arg = Arg {
        raw: raw.to_string(),
        value: Some(String::new()),
        pattern: false,
        script: None,
    };
    walk(raw, &pieces, false, &mut arg, nested, consts)?;
    Ok(arg)
}

fn push(arg: &mut Arg, text: &str) {
    if let Some(v) = arg.value.as_mut() {
        v.push_str(text);
    }
}

fn walk(
    raw: &str,
    pieces: &[WordPieceWithSource],
    quoted: bool,
    arg: &mut Arg,
    nested: &mut Vec<String>,
    consts: &Consts,
) -> Result<(), String> {
    for p in pieces {
        match &p.piece {
            WordPiece::Text(t) => {
                if !quoted && t.contains(['*', '?', '[', '{', '(']) {
                    arg.pattern = true;
                }
                push(arg, t);
            }
            WordPiece::SingleQuotedText(t) => push(arg, t),
            // `$'\x72m'` is `rm`: decoded as bash decodes it.
            WordPiece::AnsiCQuotedText(t) => push(arg, &ansi_c(t)),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                walk(raw, inner, true, arg, nested, consts)?;
            }
            WordPiece::TildeExpansion(_) => push(arg, "~"),
            WordPiece::EscapeSequence(e) => push(arg, &unescape(e, quoted)),
            WordPiece::CommandSubstitution(text)
            | WordPiece::BackquotedCommandSubstitution(text) => {
                arg.value = None;
                nested.push(text.clone());
            }
            WordPiece::ParameterExpansion(_) => {
                let source = raw.get(p.start_index..p.end_index).unwrap_or(raw);
                // A constant: its value, where no splitting or globbing can change it.
                let value = plain_name(source).and_then(|n| consts.get(n));
                if let Some(v) =
                    value.filter(|v| quoted || !v.contains([' ', '\t', '\n', '*', '?', '[']))
                {
                    push(arg, v);
                    continue;
                }
                arg.value = None;
                // `${x:-$(..)}`: read the braces' content again. `$x` holds nothing.
                let braced = source.strip_prefix("${").and_then(|s| s.strip_suffix('}'));
                if let Some(inner) = braced {
                    substitutions_in(inner, nested)?;
                }
            }
            WordPiece::ArithmeticExpression(expr) => {
                arg.value = None;
                substitutions_in(&expr.value, nested)?;
            }
        }
    }
    Ok(())
}

/// Finds substitutions inside the text of a `${...}` or `$((...))` by reading it as a word
/// again. Each level is shorter than the one before, so this ends.
fn substitutions_in(inner: &str, nested: &mut Vec<String>) -> Result<(), String> {
    if !inner.contains(['$', '`']) {
        return Ok(());
    }
    match word::parse(inner, &ParserOptions::default()) {
        Ok(pieces) => {
            let mut scratch = Arg::default();
            walk(inner, &pieces, false, &mut scratch, nested, &Consts::new())
        }
        Err(e) => Err(format!("cannot analyse the expansion {inner:?}: {e}")),
    }
}

/// `NAME` of `$NAME` or `${NAME}`, nothing else (`${NAME:-x}`, `$1`, `$@` are not plain).
fn plain_name(source: &str) -> Option<&str> {
    let rest = source.strip_prefix('$')?;
    let name = rest
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(rest);
    let mut chars = name.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() || first == '_')
        .then_some(())
        .filter(|()| chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(|()| name)
}

/// The value of ANSI-C quoted text (`$'…'`, without the quotes), as bash gives it: `\a \b \e
/// \E \f \n \r \t \v \\ \' \" \?`, octal `\nnn`, hex `\xHH`, `\uHHHH`, `\UHHHHHHHH`, control
/// `\cX`; an unknown escape stays as written; a NUL ends the string.
pub fn ansi_c(text: &str) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            put(&mut out, c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push(b'\\');
            break;
        };
        let byte = match e {
            'a' => 0x07,
            'b' => 0x08,
            'e' | 'E' => 0x1b,
            'f' => 0x0c,
            'n' => b'\n',
            'r' => b'\r',
            't' => b'\t',
            'v' => 0x0b,
            '\\' | '\'' | '"' | '?' => e as u8,
            // One to three octal digits, this one the first.
            '0'..='7' => {
                let first = e.to_digit(8).unwrap_or(0);
                let more = digits(&mut chars, 8, 2);
                let (v, n) = more.unwrap_or((0, 0));
                ((first * 8u32.pow(n) + v) & 0xff) as u8
            }
            'x' => match digits(&mut chars, 16, 2) {
                Some((v, _)) => v as u8,
                None => {
                    out.extend_from_slice(b"\\x");
                    continue;
                }
            },
            'u' | 'U' => {
                let max = if e == 'u' { 4 } else { 8 };
                match digits(&mut chars, 16, max) {
                    Some((v, _)) => {
                        put(
                            &mut out,
                            char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER),
                        );
                    }
                    None => {
                        out.push(b'\\');
                        put(&mut out, e);
                    }
                }
                continue;
            }
            'c' => match chars.next() {
                Some(x) => (x as u32 & 0x1f) as u8,
                None => {
                    out.extend_from_slice(b"\\c");
                    continue;
                }
            },
            other => {
                out.push(b'\\');
                put(&mut out, other);
                continue;
            }
        };
        if byte == 0 {
            break;
        }
        out.push(byte);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn put(out: &mut Vec<u8>, c: char) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// Up to `max` digits of `radix` from the front: their value and how many there were.
fn digits(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    radix: u32,
    max: u32,
) -> Option<(u32, u32)> {
    let (mut value, mut n) = (0u32, 0u32);
    while n < max {
        let Some(d) = chars.peek().and_then(|c| c.to_digit(radix)) else {
            break;
        };
        chars.next();
        value = value.wrapping_mul(radix).wrapping_add(d);
        n += 1;
    }
    (n > 0).then_some((value, n))
}

/// `\r` → `r` outside quotes; inside double quotes only `\$ \` \" \\` and newline are escapes.
fn unescape(seq: &str, quoted: bool) -> String {
    let rest = seq.strip_prefix('\\').unwrap_or(seq);
    if rest == "\n" {
        return String::new();
    }
    if quoted && !rest.starts_with(['$', '`', '"', '\\']) {
        return seq.to_string();
    }
    rest.to_string()
}

/// Brackets nested deeper than this are refused before parsing: the parser recurses on them,
/// and a daemon thread's stack must survive any text a client sends.
pub const MAX_BRACKETS: usize = 48;

/// The deepest nesting of `(`, `{` and `[` (quotes ignored, so it may over-count).
pub fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' | '{' | '[' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::ansi_c;

    #[test]
    fn ansi_c_text_decodes_as_bash_does() {
        for (text, value) in [
            (r"\x72m", "rm"),
            (r"\162\155", "rm"),
            (r"\0162m", "\u{e}2m"),
            (r"\7", "\u{7}"),
            (r"\u0072\U0000006d", "rm"),
            (r"a\tb\n", "a\tb\n"),
            (r"\e[0m", "\u{1b}[0m"),
            (r"\cA", "\u{1}"),
            (r"\q\x", r"\q\x"),
            (r"it\'s", "it's"),
            (r"rm\0tail", "rm"),
            (r"\x7", "\u{7}"),
        ] {
            assert_eq!(ansi_c(text), value, "{text}");
        }
    }
}
