//! The text a session's shell is given: each command as a script file (the request's `cwd` and
//! `env` applied first, as `cd` and `export` typed before it would be), and the one line that
//! sources it between begin and end markers on both streams.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use cuba_protocol::{ProcessInfo, SpawnRequest};

/// Shell text quoted for `sh`: `'…'`, with `'` as `'\''`.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A nonce that tells this session's markers from anything a command prints.
pub fn nonce() -> String {
    let mut bytes = [0u8; 8];
    if !crate::platform::process::random_bytes(&mut bytes) {
        // Unpredictability is not needed for correctness, only uniqueness in the stream.
        let t = cuba_protocol::now_ms() ^ u64::from(std::process::id()) << 40;
        bytes = t.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The script a command becomes: the request's `cwd` and `env` change the session (as `cd` and
/// `export` typed before it would), then the command text.
pub fn script_text(req: &SpawnRequest, client_cwd: &Path) -> String {
    let mut text = String::new();
    if let Some(dir) = &req.cwd {
        let dir = client_cwd.join(dir);
        let dir = String::from_utf8_lossy(dir.as_os_str().as_bytes()).into_owned();
        text.push_str(&format!("cd -- {} || return 1\n", quote(&dir)));
    }
    for (k, v) in &req.env {
        let k = String::from_utf8_lossy(k.as_bytes());
        let v = String::from_utf8_lossy(v.as_bytes());
        text.push_str(&format!("export {k}={}\n", quote(&v)));
    }
    text.push_str(&req.command);
    text.push('\n');
    text
}

/// The line the shell reads for command `id`: markers around the sourced script, SIGINT ending
/// the script (not the shell).
pub fn run_line(nonce: &str, id: u64, script: &Path) -> String {
    let mark = |body: &str| format!(r"printf '\036CUBA{nonce}{body}\036'");
    let begin = mark(&format!("B{id}"));
    let end = mark(&format!("E{id}:%s"));
    let path = quote(&script.display().to_string());
    format!(
        "{begin}; {begin} >&2; trap 'trap - INT; return 130' INT; . {path}; \
         __cuba_status=$?; trap - INT; {end} \"$__cuba_status\"; {end} \"$__cuba_status\" >&2\n"
    )
}

/// The first line of a command, shortened, for messages.
pub fn preview(command: &str) -> String {
    let line = command.lines().next().unwrap_or("");
    if line.chars().count() > 60 {
        format!("{}…", line.chars().take(60).collect::<String>())
    } else {
        line.to_string()
    }
}

/// How a record ended, in a few words.
pub fn ended_how(info: &ProcessInfo) -> String {
    match (info.exit_code, info.signal) {
        (_, Some(sig)) => format!("{}, {sig}", info.state),
        (Some(code), None) => format!("{}, exit {code}", info.state),
        (None, None) => info.state.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_line_and_script_quote_paths_and_values() {
        let line = run_line("n0", 5, Path::new("/tmp/it's/5.sh"));
        assert!(line.contains(r"printf '\036CUBAn0B5\036'"), "{line}");
        assert!(line.contains(r". '/tmp/it'\''s/5.sh'"), "{line}");
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let req = SpawnRequest {
            command: "echo $A".into(),
            cwd: Some("sub dir".into()),
            env: vec![("A".into(), "x'y".into())],
            ..SpawnRequest::default()
        };
        let text = script_text(&req, Path::new("/w"));
        assert_eq!(
            text,
            "cd -- '/w/sub dir' || return 1\nexport A='x'\\''y'\necho $A\n"
        );
        assert_eq!(nonce().len(), 16);
    }
}
