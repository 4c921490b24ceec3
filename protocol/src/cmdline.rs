//! Windows command lines, as the MSVC runtime (and `CommandLineToArgvW`, and std) read them
//! back. Pure, so it is tested on every OS: the daemon builds shells' command lines with it and
//! cubactl quotes the words of a command for a Windows daemon.

/// Appends `arg` in double quotes: `\"` for a quote, backslashes doubled only where a quote
/// follows them (inside, and before the closing one).
pub fn push_quoted(line: &mut String, arg: &str) {
    line.push('"');
    let mut backslashes = 0;
    for c in arg.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                // 2n + 1 backslashes before a quote: n literal ones and the quote itself.
                line.extend(std::iter::repeat_n('\\', backslashes + 1));
                backslashes = 0;
            }
            _ => backslashes = 0,
        }
        line.push(c);
    }
    line.extend(std::iter::repeat_n('\\', backslashes));
    line.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(arg: &str) -> String {
        let mut line = String::new();
        push_quoted(&mut line, arg);
        line
    }

    #[test]
    fn quotes_and_the_backslashes_before_them_are_escaped_and_no_others() {
        assert_eq!(quoted("a b"), r#""a b""#);
        assert_eq!(quoted(r#"say "hi""#), r#""say \"hi\"""#);
        assert_eq!(quoted(r"C:\dir\x"), r#""C:\dir\x""#);
        assert_eq!(quoted(r"end\"), r#""end\\""#);
        assert_eq!(quoted(r#"a\"b"#), r#""a\\\"b""#);
        assert_eq!(quoted(""), r#""""#);
    }
}
