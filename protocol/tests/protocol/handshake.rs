//! Tests of the fixed-layout version handshake: versions, magic, refusals and truncation.

#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
use crate::strategies;

use cuba_protocol::handshake::{
    decode_hello, decode_welcome, encode_hello, encode_refusal, encode_welcome, HandshakeError,
    HelloOutcome, MAGIC,
};
use cuba_protocol::wire::WireError;
use cuba_protocol::*;
use proptest::prelude::*;

fn hello() -> Hello {
    Hello {
        client: ClientInfo {
            kind: ClientKind::Mcp,
            name: "claude-code ✓".into(),
            pid: 1234,
            cwd: "/home/u/projekt".into(),
            env: vec![("PATH".into(), "/usr/bin".into())],
        },
        remote: false,
    }
}

fn welcome() -> Welcome {
    Welcome {
        daemon_version: VERSION.into(),
        daemon_pid: 4321,
        env: Vec::new(),
    }
}

/// `frame` with its version field (bytes 4..8) replaced.
fn with_version(mut frame: Vec<u8>, version: u32) -> Vec<u8> {
    frame[4..8].copy_from_slice(&version.to_be_bytes());
    frame
}

#[test]
fn hello_of_this_version_is_accepted() {
    let frame = encode_hello(&hello()).unwrap();
    assert!(matches!(decode_hello(&frame).unwrap(), HelloOutcome::Ok(h) if h == hello()));
}

#[test]
fn hello_of_another_version_is_reported_not_decoded() {
    let frame = encode_hello(&hello()).unwrap();
    for version in [0, PROTOCOL_VERSION + 1, u32::MAX] {
        let outcome = decode_hello(&with_version(frame.clone(), version)).unwrap();
        assert!(matches!(outcome, HelloOutcome::WrongVersion(v) if v == version));
        // A future client's body is not ours to decode: any body, even none, gives the version.
        let bare = with_version(frame[..8].to_vec(), version);
        let outcome = decode_hello(&bare).unwrap();
        assert!(matches!(outcome, HelloOutcome::WrongVersion(v) if v == version));
    }
}

#[test]
fn bad_magic_is_refused() {
    let mut frame = encode_hello(&hello()).unwrap();
    frame[..4].copy_from_slice(b"HTTP");
    assert!(matches!(
        decode_hello(&frame),
        Err(HandshakeError::BadMagic)
    ));
    assert!(matches!(
        decode_welcome(&frame),
        Err(HandshakeError::BadMagic)
    ));
    // Too short to hold a prefix, and already not ours.
    for short in [&b"G"[..], b"GET", b"CUBX"] {
        assert!(matches!(decode_hello(short), Err(HandshakeError::BadMagic)));
        assert!(matches!(
            decode_welcome(short),
            Err(HandshakeError::BadMagic)
        ));
    }
}

#[test]
fn welcome_round_trips() {
    let frame = encode_welcome(&welcome()).unwrap();
    assert_eq!(&frame[..4], MAGIC);
    assert_eq!(decode_welcome(&frame).unwrap(), welcome());
}

#[test]
fn welcome_of_another_version_tells_how_to_restart() {
    let frame = with_version(encode_welcome(&welcome()).unwrap(), PROTOCOL_VERSION + 1);
    let err = decode_welcome(&frame).unwrap_err();
    assert!(matches!(
        err,
        HandshakeError::VersionMismatch { daemon, client, daemon_pid: 4321 }
            if daemon == PROTOCOL_VERSION + 1 && client == PROTOCOL_VERSION
    ));
    let text = err.to_string();
    assert!(text.contains("cubactl daemon restart"), "{text}");
    assert!(text.contains("kill 4321"), "{text}");

    // What an old or new daemon actually sends a client of another version: a refusal. The
    // version is checked first, so the client still learns how to fix it.
    let refusal = with_version(encode_refusal(4321, "wrong version"), 0);
    assert!(matches!(
        decode_welcome(&refusal),
        Err(HandshakeError::VersionMismatch { daemon: 0, .. })
    ));
}

#[test]
fn refusal_carries_its_reason() {
    for reason in [
        "",
        "peer uid 1001 is not the daemon's uid",
        "zu viele Clients — später",
    ] {
        let frame = encode_refusal(7, reason);
        assert!(
            matches!(decode_welcome(&frame), Err(HandshakeError::Refused(r)) if r == reason),
            "{reason:?}"
        );
    }
    // A reason that is not UTF-8 still arrives, lossily.
    let mut frame = encode_refusal(7, "bad ");
    frame.push(0xff);
    assert!(matches!(
        decode_welcome(&frame),
        Err(HandshakeError::Refused(r)) if r == "bad \u{fffd}"
    ));
}

#[test]
fn welcome_with_trailing_bytes_is_an_error() {
    let mut frame = encode_welcome(&welcome()).unwrap();
    frame.push(0);
    assert!(matches!(
        decode_welcome(&frame),
        Err(HandshakeError::Wire(WireError::Trailing(1)))
    ));
}

#[test]
fn truncated_frames_are_errors() {
    let hello_frame = encode_hello(&hello()).unwrap();
    for len in 0..hello_frame.len() {
        let result = decode_hello(&hello_frame[..len]);
        match len {
            0..8 => assert!(matches!(result, Err(HandshakeError::Truncated)), "{len}"),
            _ => assert!(matches!(result, Err(HandshakeError::Wire(_))), "{len}"),
        }
    }
    let welcome_frame = encode_welcome(&welcome()).unwrap();
    for len in 0..welcome_frame.len() {
        let result = decode_welcome(&welcome_frame[..len]);
        match len {
            0..13 => assert!(matches!(result, Err(HandshakeError::Truncated)), "{len}"),
            _ => assert!(matches!(result, Err(HandshakeError::Wire(_))), "{len}"),
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_hellos_round_trip(hello in strategies::hello()) {
        let frame = encode_hello(&hello).unwrap();
        let outcome = decode_hello(&frame).unwrap();
        prop_assert!(matches!(outcome, HelloOutcome::Ok(h) if h == hello));
    }

    #[test]
    fn arbitrary_refusals_round_trip(pid in any::<u32>(), reason in strategies::text()) {
        let frame = encode_refusal(pid, &reason);
        prop_assert!(matches!(decode_welcome(&frame), Err(HandshakeError::Refused(r)) if r == reason));
    }

    /// Garbage after a valid prefix never panics.
    #[test]
    fn garbage_after_the_prefix_never_panics(
        version in prop_oneof![Just(PROTOCOL_VERSION), any::<u32>()],
        rest in proptest::collection::vec(any::<u8>(), 0..128),
    ) {
        let mut frame = MAGIC.to_vec();
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&rest);
        let _ = decode_hello(&frame);
        let _ = decode_welcome(&frame);
    }
}
