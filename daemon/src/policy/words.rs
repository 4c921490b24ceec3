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
}

impl Arg {
    /// A literal word (used for the implicit `echo` of `xargs`).
    pub fn literal(text: &str) -> Arg {
        Arg {
            raw: text.to_string(),
            value: Some(text.to_string()),
            pattern: false,
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

/// Analyses `raw`; command texts found inside it are appended to `nested`.
pub fn analyse(raw: &str, nested: &mut Vec<String>) -> Result<Arg, String> {
    let pieces = word::parse(raw, &ParserOptions::default()).map_err(|e| e.to_string())?;
    let mut arg = Arg {
        raw: raw.to_string(),
        value: Some(String::new()),
        pattern: false,
    };
    walk(raw, &pieces, false, &mut arg, nested)?;
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
            WordPiece::AnsiCQuotedText(t) => {
                // `$'\x72m'`: escapes are not decoded here, so such a word stays unknown.
                if t.contains('\\') {
                    arg.value = None;
                } else {
                    push(arg, t);
                }
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                walk(raw, inner, true, arg, nested)?;
            }
            WordPiece::TildeExpansion(_) => push(arg, "~"),
            WordPiece::EscapeSequence(e) => push(arg, &unescape(e, quoted)),
            WordPiece::CommandSubstitution(text)
            | WordPiece::BackquotedCommandSubstitution(text) => {
                arg.value = None;
                nested.push(text.clone());
            }
            WordPiece::ParameterExpansion(_) => {
                arg.value = None;
                // `${x:-$(..)}`: read the braces' content again. `$x` holds nothing.
                let source = raw.get(p.start_index..p.end_index).unwrap_or(raw);
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
            walk(inner, &pieces, false, &mut scratch, nested)
        }
        Err(e) => Err(format!("cannot analyse the expansion {inner:?}: {e}")),
    }
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
