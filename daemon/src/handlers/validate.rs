//! What a spawn request must be before anything is checked or started: text a shell can take,
//! environment entries an OS can hold, sizes within bounds.

use cuba_protocol::{ProtocolError, SpawnRequest};

/// The longest label a process may have.
const MAX_NAME: usize = 256;

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
        let k = k.as_encoded_bytes();
        if k.is_empty() || k.contains(&b'=') || k.contains(&0) {
            return Err(bad(format!(
                "environment variable name {:?} is invalid (empty, or contains '=' or NUL)",
                String::from_utf8_lossy(k)
            )));
        }
        if v.as_encoded_bytes().contains(&0) {
            return Err(bad(format!(
                "value of environment variable {} contains a NUL byte",
                String::from_utf8_lossy(k)
            )));
        }
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
    if req.name.as_ref().is_some_and(|n| n.len() > MAX_NAME) {
        return Err(bad(format!("name is longer than {MAX_NAME} bytes")));
    }
    if let Some(size) = req.tty {
        crate::terminal::valid_size(size).map_err(bad)?;
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
}
