//! The first frame of a connection: the version handshake, the limits and the checks a client's
//! hello must pass, and refusals that reach the client.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use cuba_protocol::handshake::{self, HelloOutcome};
use cuba_protocol::{wire, ClientInfo, Welcome, PROTOCOL_VERSION, VERSION};
use futures_util::{SinkExt, StreamExt};
use tokio_util::codec::{Framed, LengthDelimitedCodec, LengthDelimitedCodecError};

use crate::platform::transport::Stream;
use crate::serving::handlers::validate::{env_entry, shown};

/// Most variables in a client's environment.
pub const MAX_ENV_VARS: usize = 4096;
/// Most bytes of a client's environment, counted as `execve` needs them: each name and value
/// plus 2 (`=` and the NUL). A child gets this environment and its arguments within Linux's
/// usual 2 MiB `ARG_MAX`; every connection keeps its client's for as long as it is open.
pub const MAX_ENV_BYTES: usize = 1024 * 1024;
/// Largest first frame: the largest environment, its encoding (at most 8 bytes of lengths and
/// tags per variable) and room for the rest (cwd, name). Checked on the length prefix, so a
/// hostile first frame makes the daemon reserve at most this much, not `wire::MAX_FRAME`.
pub const MAX_HELLO_FRAME: usize = MAX_ENV_BYTES + 8 * MAX_ENV_VARS + 64 * 1024;
/// A hello (or its environment) at least this large is worth returning memory for once it is
/// freed (a usual environment is a few KiB).
pub const LARGE_ENV: usize = 64 * 1024;
/// A read buffer grown past this for the hello is given back once the hello is read.
const KEPT_BUFFER: usize = 64 * 1024;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

pub type Conn = Framed<Stream, LengthDelimitedCodec>;

/// `large`: the hello took a large buffer, worth returning to the kernel once freed.
async fn refuse_framed(framed: &mut Conn, pid: u32, reason: &str, large: bool) {
    let frame = handshake::encode_refusal(pid, reason);
    let sent = tokio::time::timeout(HANDSHAKE_TIMEOUT, framed.send(Bytes::from(frame))).await;
    if let Ok(Ok(())) = sent {
        crate::platform::transport::linger(framed.get_mut()).await;
    }
    if large {
        super::trim::after_large_client();
    }
}

/// Reads and answers the client's hello; `None` if the connection ends here (refused, timed
/// out). The first frame is limited to [`MAX_HELLO_FRAME`]; later ones to `wire::MAX_FRAME`.
pub async fn handshake(pid: u32, framed: &mut Conn) -> Option<ClientInfo> {
    framed.codec_mut().set_max_frame_length(MAX_HELLO_FRAME);
    let first = match tokio::time::timeout(HANDSHAKE_TIMEOUT, framed.next()).await {
        Ok(Some(Ok(frame))) => frame,
        Ok(Some(Err(e))) => {
            let reason = match e
                .get_ref()
                .is_some_and(|e| e.is::<LengthDelimitedCodecError>())
            {
                true => too_large(),
                false => format!("bad handshake frame: {e}"),
            };
            let large = framed.read_buffer().capacity() >= LARGE_ENV;
            refuse_framed(framed, pid, &reason, large).await;
            return None;
        }
        _ => return None,
    };
    framed.codec_mut().set_max_frame_length(wire::MAX_FRAME);
    shrink(framed.read_buffer_mut());
    let large = first.len() >= LARGE_ENV;
    let hello = handshake::decode_hello(&first);
    drop(first);
    let refusal = match hello {
        Ok(HelloOutcome::Ok(hello)) => match check(&hello.client) {
            Ok(()) => {
                let (client, env) = match hello.remote {
                    true => {
                        let client = remote(hello.client);
                        let env = client.env.clone();
                        (client, env)
                    }
                    false => (hello.client, Vec::new()),
                };
                let welcome = Welcome {
                    daemon_version: VERSION.to_string(),
                    daemon_pid: pid,
                    env,
                };
                match handshake::encode_welcome(&welcome) {
                    Ok(frame) => {
                        framed.send(Bytes::from(frame)).await.ok()?;
                        return Some(client);
                    }
                    Err(e) => e.to_string(),
                }
            }
            Err(reason) => reason,
        },
        Ok(HelloOutcome::WrongVersion(v)) => format!(
            "client speaks protocol {v}, cubad {VERSION} speaks {PROTOCOL_VERSION}; restart \
             the daemon (`cubactl daemon restart`) so both are the same version"
        ),
        Err(e) => e.to_string(),
    };
    refuse_framed(framed, pid, &refusal, large).await;
    None
}

/// A client on another machine, as what it starts sees it: this daemon's environment (the
/// remote user's; the bridge carries none of the client machine's) with the client's policy
/// narrowing on top, and the home directory when it names no working directory.
fn remote(mut client: ClientInfo) -> ClientInfo {
    let mut env: cuba_protocol::Env = std::env::vars_os().collect();
    env.append(&mut client.env);
    client.env = env;
    if client.cwd.is_empty() {
        client.cwd = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "/".into());
    }
    client
}

/// The buffer that held a large hello is not kept for the rest of the connection.
fn shrink(buf: &mut BytesMut) {
    if buf.capacity() > KEPT_BUFFER {
        let rest = BytesMut::from(&buf[..]);
        *buf = rest;
    }
}

fn too_large() -> String {
    format!(
        "the hello is larger than the {} KiB cubad accepts: a client's environment may hold at \
         most {MAX_ENV_VARS} variables and {} KiB; start the client with a smaller environment",
        MAX_HELLO_FRAME / 1024,
        MAX_ENV_BYTES / 1024
    )
}

/// Bytes `env` takes as `execve` counts them.
pub fn env_bytes(env: &cuba_protocol::Env) -> usize {
    env.iter()
        .map(|(k, v)| k.len() + v.len() + 2)
        .fold(0, usize::saturating_add)
}

/// Why the daemon cannot serve `client`, if it cannot: an environment over the limits, or one
/// that no process could be given (checked once here, so not every spawn fails on it later).
pub fn check(client: &ClientInfo) -> Result<(), String> {
    let fix = "start the client with a smaller environment";
    if client.env.len() > MAX_ENV_VARS {
        return Err(format!(
            "the client's environment has {} variables, more than the {MAX_ENV_VARS} cubad \
             accepts; {fix}",
            client.env.len()
        ));
    }
    let bytes = env_bytes(&client.env);
    if bytes > MAX_ENV_BYTES {
        return Err(format!(
            "the client's environment is {bytes} bytes (names, values and 2 per variable), more \
             than the {} KiB cubad accepts; {fix}",
            MAX_ENV_BYTES / 1024
        ));
    }
    for (k, v) in &client.env {
        env_entry(k.as_encoded_bytes(), v.as_encoded_bytes())
            .map_err(|why| format!("the client's {why}"))?;
    }
    let cwd = client.cwd.as_encoded_bytes();
    if cwd.contains(&0) {
        return Err(format!(
            "the client's working directory {} has a NUL byte, which no path can hold",
            shown(cwd)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::ffi::OsString;

    use cuba_protocol::{ClientKind, Hello};

    use super::*;

    #[cfg(unix)]
    fn os(b: &[u8]) -> OsString {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(b.to_vec())
    }

    /// On Windows a name or value is Unicode: bytes that are not UTF-8 become U+FFFD.
    #[cfg(windows)]
    fn os(b: &[u8]) -> OsString {
        OsString::from(String::from_utf8_lossy(b).into_owned())
    }

    fn client(env: Vec<(&[u8], &[u8])>) -> ClientInfo {
        ClientInfo {
            kind: ClientKind::Other,
            name: "t".into(),
            pid: 1,
            cwd: "/".into(),
            env: env.into_iter().map(|(k, v)| (os(k), os(v))).collect(),
        }
    }

    #[test]
    fn an_ordinary_environment_passes() {
        let c = client(vec![
            (b"PATH", b"/bin"),
            (b"EMPTY", b""),
            (b"X", "é".as_bytes()),
        ]);
        assert!(check(&c).is_ok());
        assert_eq!(env_bytes(&c.env), 4 + 4 + 2 + 5 + 2 + 1 + 2 + 2);
    }

    #[test]
    fn too_many_variables_are_refused() {
        let names: Vec<Vec<u8>> = (0..=MAX_ENV_VARS).map(|i| format!("V{i}").into()).collect();
        let mut c = client(names.iter().map(|n| (&n[..], &b"1"[..])).collect());
        let why = check(&c).unwrap_err();
        assert!(
            why.contains("4097 variables") && why.contains("4096"),
            "{why}"
        );
        c.env.pop();
        assert!(check(&c).is_ok());
    }

    #[test]
    fn too_many_bytes_are_refused_exactly_past_the_limit() {
        // One variable of exactly the limit: name "A", '=', NUL and the value.
        let value = vec![b'x'; MAX_ENV_BYTES - 3];
        let mut c = client(vec![(b"A", &value)]);
        assert!(check(&c).is_ok());
        c.env[0].1.push("y");
        let why = check(&c).unwrap_err();
        assert!(
            why.contains(&format!("{} bytes", MAX_ENV_BYTES + 1)),
            "{why}"
        );
        assert!(why.contains("1024 KiB"), "{why}");
    }

    #[test]
    fn entries_no_process_could_hold_are_refused_by_name() {
        let why = |k: &[u8], v: &[u8]| check(&client(vec![(b"OK", b"1"), (k, v)])).unwrap_err();
        assert!(why(b"A\0B", b"1").contains(r#""A\x00B" has a NUL byte in its name"#));
        assert!(why(b"A=B", b"1").contains(r#""A=B" has '='"#));
        assert!(why(b"", b"1").contains("empty name"));
        assert!(why(b"HOME", b"/h\0").contains(r#""HOME" has a NUL byte in its value"#));
        let mut c = client(vec![]);
        c.cwd = OsString::from("/w\0x");
        assert!(check(&c).unwrap_err().contains(r#""/w\x00x""#));
    }

    #[test]
    fn the_largest_accepted_hello_fits_the_first_frame() {
        // Every variable as long as the byte limit allows, names and values alike.
        let per = MAX_ENV_BYTES / MAX_ENV_VARS - 2;
        let names: Vec<Vec<u8>> = (0..MAX_ENV_VARS)
            .map(|i| format!("{i:0width$}", width = per / 2).into())
            .collect();
        let value = vec![b'v'; per - per / 2];
        let mut c = client(names.iter().map(|n| (&n[..], &value[..])).collect());
        c.cwd = OsString::from(format!("/{}", "d".repeat(4095)));
        c.name = "n".repeat(256);
        assert!(check(&c).is_ok());
        let frame = handshake::encode_hello(&Hello {
            client: c,
            remote: false,
        })
        .unwrap();
        assert!(frame.len() <= MAX_HELLO_FRAME, "{}", frame.len());
    }

    #[test]
    fn a_remote_client_starts_from_the_daemons_environment_and_home() {
        let mut c = client(vec![(b"CUBA_EXEC_ALLOWED_COMMANDS", b"echo")]);
        c.cwd = OsString::new();
        let r = remote(c);
        let path = std::env::var_os("PATH").unwrap();
        assert!(r.env.iter().any(|(k, v)| k == "PATH" && *v == path));
        // The client's narrowing comes last, so it is the value the policy reads.
        assert_eq!(
            r.env.last().unwrap(),
            &("CUBA_EXEC_ALLOWED_COMMANDS".into(), "echo".into())
        );
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
        assert_eq!(r.cwd, home.unwrap_or_else(|| "/".into()));
    }
}
