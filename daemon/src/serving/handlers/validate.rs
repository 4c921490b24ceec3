//! What a spawn request must be before anything is checked or started: text a shell can take,
//! environment entries an OS can hold, sizes within bounds.

use cuba_protocol::{ProtocolError, SpawnRequest};

/// The longest label a process may have.
const MAX_NAME: usize = 256;
/// The most bytes of a name or value a message quotes: enough to recognise it.
const SHOWN: usize = 64;

/// Why `name=value` cannot be an entry of a process's environment (`execve` takes
/// `NAME=VALUE` strings ending in NUL), if it cannot. Shared by a spawn's own `env` and the
/// client's environment in its hello, which every spawn of that connection inherits.
pub fn env_entry(name: &[u8], value: &[u8]) -> Result<(), String> {
    let problem = if name.is_empty() {
        "has an empty name"
    } else if name.contains(&b'=') {
        "has '=' in its name"
    } else if name.contains(&0) {
        "has a NUL byte in its name"
    } else if value.contains(&0) {
        "has a NUL byte in its value"
    } else {
        return Ok(());
    };
    Err(format!(
        "environment variable {} {problem}, which no process environment can hold",
        shown(name)
    ))
}

/// `bytes` quoted for a message: non-printable and non-ASCII bytes escaped (a NUL as `\x00`),
/// cut after [`SHOWN`] bytes.
pub fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(SHOWN)];
    let more = if cut.len() < bytes.len() { "…" } else { "" };
    format!("\"{}\"{more}", cut.escape_ascii())
}

pub fn spawn_request(req: &SpawnRequest) -> Result<(), ProtocolError> {
    let bad = |m: String| ProtocolError::bad_request(m);
    if req.command.trim().is_empty() {
        return Err(bad("command is empty: pass the shell text to run".into()));
    }
    if req.command.contains('\0') {
        return Err(bad(
            "command contains a NUL byte, which no shell can receive".into(),
        ));
    }
    for (k, v) in &req.env {
        env_entry(k.as_encoded_bytes(), v.as_encoded_bytes()).map_err(bad)?;
    }
    if req
        .cwd
        .as_ref()
        .is_some_and(|c| c.as_encoded_bytes().contains(&0))
    {
        return Err(bad("cwd contains a NUL byte".into()));
    }
    if req
        .shell
        .as_ref()
        .is_some_and(|s| s.is_empty() || s.contains('\0'))
    {
        return Err(bad(
            "shell must be a non-empty path without NUL bytes".into()
        ));
    }
    if req.port.is_some() && req.session.is_some() {
        // A session's shell has one environment for all its commands: no `PORT` of one's own.
        return Err(bad(
            "port cannot be combined with session: start the server without `session`".into(),
        ));
    }
    if req.name.as_ref().is_some_and(|n| n.len() > MAX_NAME) {
        return Err(bad(format!("name is longer than {MAX_NAME} bytes")));
    }
    if let Some(size) = req.tty {
        crate::parts::terminal::valid_size(size).map_err(bad)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn req(command: &str) -> SpawnRequest {
        SpawnRequest {
            command: command.into(),
            ..SpawnRequest::default()
        }
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let why = |r: SpawnRequest| spawn_request(&r).unwrap_err().message;
        assert!(why(req("  ")).contains("empty"));
        assert!(why(req("a\0b")).contains("NUL"));
        let mut r = req("true");
        r.env = vec![("A=B".into(), "x".into())];
        assert!(why(r).contains("A=B"));
        let mut r = req("true");
        r.name = Some("n".repeat(MAX_NAME + 1));
        assert!(why(r).contains("name"));
        let mut r = req("true");
        r.tty = Some(cuba_protocol::TtySize { cols: 0, rows: 10 });
        assert!(why(r).contains("at least 1"));
        assert!(spawn_request(&req("true")).is_ok());
    }

    #[test]
    fn environment_entries_name_the_variable_escaped() {
        let why = |k: &[u8], v: &[u8]| env_entry(k, v).unwrap_err();
        assert!(why(b"", b"x").contains("empty name"));
        assert!(why(b"A=B", b"x").contains(r#""A=B" has '='"#));
        assert!(why(b"A\0B", b"x").contains(r#""A\x00B" has a NUL byte in its name"#));
        assert!(why(b"PATH", b"/bin\0/x").contains(r#""PATH" has a NUL byte in its value"#));
        assert!(why(b"\n\xff", b"\0").contains(r#""\n\xff""#));
        let long = why(&[b'N'; 200], b"\0");
        assert!(
            long.contains(&format!("\"{}\"…", "N".repeat(SHOWN))),
            "{long}"
        );
        assert!(env_entry(b"A", b"").is_ok());
        assert!(env_entry("É".as_bytes(), "é".as_bytes()).is_ok());

        let mut r = req("true");
        r.env = vec![("K".into(), "a\0b".into())];
        assert!(spawn_request(&r).unwrap_err().message.contains(r#""K""#));
        let mut r = req("true");
        r.cwd = Some("/tmp\0x".into());
        assert!(spawn_request(&r).unwrap_err().message.contains("NUL"));
    }
}
