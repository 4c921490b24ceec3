//! Named keys for terminal input: what `send_input` sends for `Enter`, `C-c`, `Up`, … The bytes
//! are what a terminal emulator (xterm, in normal cursor mode) sends for that key, so a program
//! on a PTY sees a real key press, and `C-c` / `C-z` / `C-d` go through the line discipline.

/// The bytes for the key called `name` (case-insensitive): `Enter`, `Tab`, `Esc`, `Backspace`,
/// `Space`, `Up`, `Down`, `Left`, `Right`, `Home`, `End`, `PageUp`, `PageDown`, `Insert`,
/// `Delete`, `F1`–`F12`, `C-a`…`C-z` (also `^C`, `Ctrl-C`), `C-[`, `C-\`, `C-]`, `C-@`, and
/// `M-x` (Alt: Esc, then the key). `None` for an unknown name.
pub fn key_bytes(name: &str) -> Option<Vec<u8>> {
    let lower = name.trim().to_ascii_lowercase();
    if let Some(rest) = lower
        .strip_prefix("m-")
        .or_else(|| lower.strip_prefix("alt-"))
        .or_else(|| lower.strip_prefix("alt+"))
    {
        let mut out = vec![0x1b];
        out.extend(key_bytes(rest).or_else(|| single(rest))?);
        return Some(out);
    }
    if let Some(rest) = lower
        .strip_prefix("c-")
        .or_else(|| lower.strip_prefix("ctrl-"))
        .or_else(|| lower.strip_prefix("ctrl+"))
        .or_else(|| lower.strip_prefix('^'))
    {
        return control(rest);
    }
    let fixed: &[u8] = match lower.as_str() {
        "enter" | "return" | "ret" | "cr" => b"\r",
        "tab" => b"\t",
        "esc" | "escape" => b"\x1b",
        "backspace" | "bs" => b"\x7f",
        "space" => b" ",
        "up" => b"\x1b[A",
        "down" => b"\x1b[B",
        "right" => b"\x1b[C",
        "left" => b"\x1b[D",
        "home" => b"\x1b[H",
        "end" => b"\x1b[F",
        "pageup" | "pgup" => b"\x1b[5~",
        "pagedown" | "pgdn" => b"\x1b[6~",
        "insert" | "ins" => b"\x1b[2~",
        "delete" | "del" => b"\x1b[3~",
        "f1" => b"\x1bOP",
        "f2" => b"\x1bOQ",
        "f3" => b"\x1bOR",
        "f4" => b"\x1bOS",
        "f5" => b"\x1b[15~",
        "f6" => b"\x1b[17~",
        "f7" => b"\x1b[18~",
        "f8" => b"\x1b[19~",
        "f9" => b"\x1b[20~",
        "f10" => b"\x1b[21~",
        "f11" => b"\x1b[23~",
        "f12" => b"\x1b[24~",
        _ => return None,
    };
    Some(fixed.to_vec())
}

/// A single printable ASCII character (for `M-x`).
fn single(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    (b.len() == 1 && b[0].is_ascii_graphic()).then(|| b.to_vec())
}

/// `C-x`: the control character for a letter or one of `@[\]^_` (and `space` for NUL).
fn control(rest: &str) -> Option<Vec<u8>> {
    let b = rest.as_bytes();
    let c = match (b.len(), b.first()) {
        (1, Some(c @ b'a'..=b'z')) => c - b'a' + 1,
        (1, Some(b'@')) => 0,
        (1, Some(b'[')) => 0x1b,
        (1, Some(b'\\')) => 0x1c,
        (1, Some(b']')) => 0x1d,
        (1, Some(b'^')) => 0x1e,
        (1, Some(b'_')) => 0x1f,
        (1, Some(b'?')) => 0x7f,
        _ if rest == "space" => 0,
        _ => return None,
    };
    Some(vec![c])
}

/// The names [`key_bytes`] knows, for help texts and error messages.
pub const KEY_NAMES: &str = "Enter, Tab, Esc, Backspace, Space, Up, Down, Left, Right, Home, End, \
                             PageUp, PageDown, Insert, Delete, F1-F12, C-a..C-z (C-c, C-d, C-z), \
                             C-[, C-\\, C-], C-@, M-<key>";

#[cfg(test)]
mod tests {
    use super::key_bytes;

    #[test]
    fn names_map_to_terminal_bytes() {
        let cases: &[(&str, &[u8])] = &[
            ("Enter", b"\r"),
            ("enter", b"\r"),
            ("Tab", b"\t"),
            ("Esc", b"\x1b"),
            ("Up", b"\x1b[A"),
            ("Down", b"\x1b[B"),
            ("Right", b"\x1b[C"),
            ("Left", b"\x1b[D"),
            ("C-c", b"\x03"),
            ("C-d", b"\x04"),
            ("C-z", b"\x1a"),
            ("^C", b"\x03"),
            ("Ctrl-A", b"\x01"),
            ("C-]", b"\x1d"),
            ("M-x", b"\x1bx"),
            ("M-Enter", b"\x1b\r"),
            ("F5", b"\x1b[15~"),
            ("PageDown", b"\x1b[6~"),
        ];
        for (name, bytes) in cases {
            assert_eq!(key_bytes(name).as_deref(), Some(*bytes), "{name}");
        }
    }

    #[test]
    fn unknown_names_are_none() {
        for name in ["", "Foo", "C-", "C-cc", "C-1", "M-", "F13"] {
            assert_eq!(key_bytes(name), None, "{name}");
        }
    }
}
