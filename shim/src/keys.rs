//! `send_input` keys as bytes for one process: the key names of `cuba_protocol::keys`, with
//! Enter as a process without a terminal expects it.

use cuba_protocol::keys::{key_bytes, KEY_NAMES};

use crate::error::Failure;

/// The bytes for `keys`. A process without a terminal reads lines ending in `\n`, so there
/// Enter is `\n`; on a terminal it is the `\r` a keyboard sends.
pub fn keys_bytes(keys: &[String], tty: bool) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    for name in keys {
        let Some(bytes) = key_bytes(name) else {
            return Err(Failure::bad_request(format!(
                "unknown key {name:?}: keys are {KEY_NAMES}"
            )));
        };
        match (tty, bytes.as_slice()) {
            (false, b"\r") => out.push(b'\n'),
            _ => out.extend(bytes),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enter_is_a_newline_only_without_a_terminal() {
        let enter = ["Enter".to_string()];
        assert_eq!(keys_bytes(&enter, false), Ok(b"\n".to_vec()));
        assert_eq!(keys_bytes(&enter, true), Ok(b"\r".to_vec()));
        let bad = keys_bytes(&["Hyper-Q".to_string()], true).expect_err("unknown key");
        assert_eq!(bad.code, "BAD_REQUEST");
    }
}
