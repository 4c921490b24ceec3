//! Windows command lines for a command's text, and its environment. Pure, so it is tested on
//! every OS; only Windows runs it.
//!
//! - `cmd.exe` gets `/d /s /c "TEXT"`: `/s` makes cmd strip exactly the outer quotes and run
//!   the rest as typed, so the text needs no escaping (it *is* cmd's language); `/d` skips
//!   AutoRun commands from the registry, as `-NoProfile` does for PowerShell. Passed raw: the
//!   MSVC quoting that std applies to arguments would add backslashes cmd does not remove.
//! - PowerShell gets `-NoProfile -NonInteractive -EncodedCommand BASE64`: the text as UTF-16LE
//!   in base64, so no quoting rule of any layer touches it, preceded by a line that makes its
//!   output UTF-8.
//! - Git Bash gets `-c TEXT` as a normal argument (std's quoting is what its runtime parses).
//! - A `.bat` or `.cmd` file run as a program is std's business (`Command` quotes its
//!   arguments for cmd and refuses what cannot be quoted).

/// A shell on Windows, from its program's file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Cmd,
    PowerShell,
    /// Git for Windows' `bash.exe`, or any POSIX shell.
    Posix,
}

impl Kind {
    /// The kind of shell `program` is (`cmd`, `pwsh`, `powershell`; anything else is taken
    /// as POSIX).
    pub fn of(program: &str) -> Kind {
        let name = program
            .rsplit(['\\', '/'])
            .next()
            .unwrap_or(program)
            .to_ascii_lowercase();
        let stem = name.strip_suffix(".exe").unwrap_or(&name);
        match stem {
            "cmd" => Kind::Cmd,
            "pwsh" | "powershell" => Kind::PowerShell,
            _ => Kind::Posix,
        }
    }

    /// Whether the policy can parse this shell's text (POSIX only; the others are
    /// `unresolved` until a parser for them exists).
    pub fn parsed(self) -> bool {
        self == Kind::Posix
    }
}

/// The arguments after the program: `raw` ones go on the command line as they are, the
/// others through std's quoting.
#[derive(Debug, PartialEq, Eq)]
pub enum Args {
    Raw(String),
    Quoted(Vec<String>),
}

/// PowerShell's first line: UTF-8 out, so what the daemon reads is the text written.
const PS_UTF8: &str = "[Console]::OutputEncoding=[System.Text.Encoding]::UTF8;$OutputEncoding=[System.Text.Encoding]::UTF8;";

/// How `kind` runs `text`.
pub fn args(kind: Kind, text: &str) -> Args {
    match kind {
        Kind::Cmd => Args::Raw(format!("/d /s /c \"{text}\"")),
        Kind::PowerShell => {
            let script = format!("{PS_UTF8}\n{text}");
            let utf16le: Vec<u8> = script.encode_utf16().flat_map(u16::to_le_bytes).collect();
            Args::Quoted(vec![
                "-NoProfile".into(),
                "-NonInteractive".into(),
                "-EncodedCommand".into(),
                base64(&utf16le),
            ])
        }
        Kind::Posix => Args::Quoted(vec!["-c".into(), super::shell_command_text(text)]),
    }
}

/// The whole command line of `program` with `args`, as `CreateProcessW` takes it (where std's
/// `Command` cannot be used: a process on a pseudo console). The program and quoted arguments
/// follow the MSVC runtime's rules (what `CommandLineToArgvW` and std read back): quotes around
/// what has a space or tab or is empty, `\"` for a quote, backslashes doubled only before one.
pub fn command_line(program: &str, args: &Args) -> String {
    let mut line = String::new();
    quote_into(&mut line, program, true);
    match args {
        Args::Raw(raw) => {
            line.push(' ');
            line.push_str(raw);
        }
        Args::Quoted(list) => {
            for arg in list {
                line.push(' ');
                quote_into(&mut line, arg, false);
            }
        }
    }
    line
}

/// Appends `arg`, quoted by the MSVC rules where it needs it. A program name is always quoted
/// (it cannot hold a quote), so a path with spaces is never split.
fn quote_into(line: &mut String, arg: &str, program: bool) {
    if program || arg.is_empty() || arg.contains([' ', '\t', '"']) {
        cuba_protocol::cmdline::push_quoted(line, arg);
    } else {
        line.push_str(arg);
    }
}

/// The shell used when none is asked for: PowerShell 7, else Windows PowerShell, else cmd,
/// among the programs `exists` finds.
pub fn default_shell(exists: impl Fn(&str) -> bool) -> &'static str {
    ["pwsh.exe", "powershell.exe"]
        .into_iter()
        .find(|p| exists(p))
        .unwrap_or("cmd.exe")
}

/// `base` with `overlay` on top, names compared as Windows compares them (case-insensitively:
/// `Path` and `PATH` are one variable), the overlay's spelling kept. Sorted as Windows keeps an
/// environment block (by upper-case name), which is also the order a child sees.
pub fn merge_env(base: &[(String, String)], overlay: &[(String, String)]) -> Vec<(String, String)> {
    let mut merged: Vec<(String, String)> = Vec::with_capacity(base.len() + overlay.len());
    for (name, value) in base.iter().chain(overlay) {
        let key = name.to_uppercase();
        match merged.iter_mut().find(|(n, _)| n.to_uppercase() == key) {
            Some(slot) => *slot = (name.clone(), value.clone()),
            None => merged.push((name.clone(), value.clone())),
        }
    }
    merged.sort_by_key(|(n, _)| n.to_uppercase());
    merged
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_are_known_by_their_file_name() {
        assert_eq!(Kind::of(r"C:\Windows\System32\cmd.exe"), Kind::Cmd);
        assert_eq!(Kind::of("CMD"), Kind::Cmd);
        assert_eq!(
            Kind::of(r"C:\Program Files\PowerShell\7\pwsh.exe"),
            Kind::PowerShell
        );
        assert_eq!(Kind::of("powershell.exe"), Kind::PowerShell);
        assert_eq!(Kind::of(r"C:\Program Files\Git\bin\bash.exe"), Kind::Posix);
        assert!(Kind::Posix.parsed() && !Kind::Cmd.parsed() && !Kind::PowerShell.parsed());
    }

    #[test]
    fn cmd_takes_the_text_as_typed_between_outer_quotes() {
        let text = r#"echo "a b" & dir C:\x\ | find "y""#;
        assert_eq!(
            args(Kind::Cmd, text),
            Args::Raw(format!(r#"/d /s /c "{text}""#))
        );
    }

    #[test]
    fn powershell_gets_its_text_encoded_with_utf8_output_first() {
        let Args::Quoted(a) = args(Kind::PowerShell, "Write-Output 'é'") else {
            panic!("quoted arguments")
        };
        assert_eq!(a[..3], ["-NoProfile", "-NonInteractive", "-EncodedCommand"]);
        let decoded = decode_utf16le_base64(&a[3]);
        assert_eq!(decoded, format!("{PS_UTF8}\nWrite-Output 'é'"));
    }

    #[test]
    fn a_posix_shell_gets_dash_c() {
        assert_eq!(
            args(Kind::Posix, "ls 'a b'"),
            Args::Quoted(vec!["-c".into(), "ls 'a b'".into()])
        );
    }

    #[test]
    fn command_lines_quote_as_the_msvc_runtime_reads_them() {
        let line = |args: &[&str]| {
            command_line(
                r"C:\Program Files\Git\bin\bash.exe",
                &Args::Quoted(args.iter().map(|a| a.to_string()).collect()),
            )
        };
        assert_eq!(
            line(&["-c", "echo hi"]),
            r#""C:\Program Files\Git\bin\bash.exe" -c "echo hi""#
        );
        assert_eq!(line(&[""]), r#""C:\Program Files\Git\bin\bash.exe" """#);
        assert_eq!(
            line(&[r#"a"b"#]),
            r#""C:\Program Files\Git\bin\bash.exe" "a\"b""#
        );
        assert_eq!(
            line(&[r"a\b"]),
            r#""C:\Program Files\Git\bin\bash.exe" a\b"#
        );
        assert_eq!(
            line(&[r"a b\"]),
            r#""C:\Program Files\Git\bin\bash.exe" "a b\\""#
        );
        assert_eq!(
            line(&[r#"a\"b c"#]),
            r#""C:\Program Files\Git\bin\bash.exe" "a\\\"b c""#
        );
        assert_eq!(
            command_line("cmd.exe", &args(Kind::Cmd, "echo \"x\"")),
            r#""cmd.exe" /d /s /c "echo "x"""#
        );
    }

    #[test]
    fn the_default_shell_is_the_newest_powershell_there_is() {
        assert_eq!(default_shell(|_| true), "pwsh.exe");
        assert_eq!(default_shell(|p| p == "powershell.exe"), "powershell.exe");
        assert_eq!(default_shell(|_| false), "cmd.exe");
    }

    #[test]
    fn environment_names_are_one_variable_whatever_their_case_and_sorted() {
        let base = vec![
            ("Path".to_string(), r"C:\a".to_string()),
            ("windir".to_string(), r"C:\Windows".to_string()),
            ("ALLUSERSPROFILE".to_string(), r"C:\ProgramData".to_string()),
        ];
        let overlay = vec![("PATH".to_string(), r"C:\b".to_string())];
        assert_eq!(
            merge_env(&base, &overlay),
            [
                ("ALLUSERSPROFILE".to_string(), r"C:\ProgramData".to_string()),
                ("PATH".to_string(), r"C:\b".to_string()),
                ("windir".to_string(), r"C:\Windows".to_string()),
            ]
        );
    }

    #[test]
    fn base64_pads_as_the_standard_says() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    fn decode_utf16le_base64(text: &str) -> String {
        const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bits = 0u32;
        let mut n = 0;
        let mut bytes = Vec::new();
        for c in text.chars().filter(|c| *c != '=') {
            bits = bits << 6 | ALPHABET.find(c).expect("base64") as u32;
            n += 6;
            if n >= 8 {
                n -= 8;
                bytes.push((bits >> n) as u8);
            }
        }
        let units: Vec<u16> = bytes
            .chunks(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .collect();
        String::from_utf16(&units).expect("utf-16")
    }
}
