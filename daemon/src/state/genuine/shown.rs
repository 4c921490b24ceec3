//! How a question shows a program's text: its command line shortened and quoted, and any text
//! of a program's with its control characters escaped.

#[cfg(unix)]
use std::path::Path;

/// The most characters of a command line a question shows.
#[cfg(unix)]
pub(super) const MAX_CMDLINE: usize = 200;

/// A command line as a question shows it: the program's name (its path is shown beside it),
/// the arguments quoted where a space or quote would blur them, control characters escaped,
/// at most [`MAX_CMDLINE`] characters.
#[cfg(unix)]
pub(super) fn command_line(args: &[String]) -> String {
    let words: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let a = match i {
                0 => Path::new(a)
                    .file_name()
                    .map_or(a.clone(), |n| n.to_string_lossy().into_owned()),
                _ => a.clone(),
            };
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a
            }
        })
        .collect();
    shortened(&escaped(&words.join(" "), false), MAX_CMDLINE)
}

/// `text` with control characters escaped (`\u{1b}`): a program's text must not move the
/// person's cursor or colour their terminal. `lines`: keep newlines and tabs.
pub fn escaped(text: &str, lines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && !(lines && matches!(c, '\n' | '\t')) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max` characters of `text`, `…` in place of the rest.
pub fn shortened(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}
