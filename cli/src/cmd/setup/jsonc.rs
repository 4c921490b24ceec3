//! Reading (never writing) JSON with comments and trailing commas, as Zed's and VS Code's
//! settings allow: enough to tell such a file from a broken one, and to see whether our entry
//! is already there.

use serde_json::Value;

/// The value of a JSONC text, or `None` when it is not valid even as JSONC.
pub fn parse(text: &str) -> Option<Value> {
    serde_json::from_str(&strip(text)).ok()
}

/// `text` with comments turned into spaces and trailing commas removed (strings untouched).
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    // Where in `out` the last comma went, while only whitespace and comments followed it.
    let mut comma: Option<usize> = None;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                comma = None;
                out.push(c);
                while let Some(s) = chars.next() {
                    out.push(s);
                    match s {
                        '\\' => out.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                // The newline stays, so serde_json's line numbers still match.
                while chars.next_if(|&n| n != '\n').is_some() {}
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for n in chars.by_ref() {
                    if last == '*' && n == '/' {
                        break;
                    }
                    if n == '\n' {
                        out.push('\n');
                    }
                    last = n;
                }
                out.push(' ');
            }
            ',' => {
                comma = Some(out.len());
                out.push(c);
            }
            '}' | ']' => {
                if let Some(i) = comma.take() {
                    out.replace_range(i..i + 1, " ");
                }
                out.push(c);
            }
            c if c.is_whitespace() => out.push(c),
            c => {
                comma = None;
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn comments_and_trailing_commas() {
        let text = "// Zed settings\n{\n  \"a\": \"//not a comment\", /* x */\n  \"b\": [1, 2,],\n  \"c\": {\"d\": \"\\\"\",},\n}\n";
        assert_eq!(
            parse(text),
            Some(json!({"a": "//not a comment", "b": [1, 2], "c": {"d": "\""}}))
        );
    }

    #[test]
    fn broken_stays_broken() {
        assert_eq!(parse("{ \"a\": }"), None);
        assert_eq!(parse("{ \"a\": 1 /* unterminated"), None);
    }
}
