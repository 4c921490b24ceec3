//! Tests of the wire format: round trips, hostile bodies and length-prefix framing.
//! (The exact bytes are frozen in `golden.rs`.)

#![allow(clippy::unwrap_used)]

use crate::strategies;

use bytes::{Bytes, BytesMut};
use cuba_protocol::handshake;
use cuba_protocol::wire::{self, WireError, MAX_FRAME};
use cuba_protocol::*;
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn cancel_frame(id: u64) -> RequestFrame {
    RequestFrame {
        id,
        request: Request::Cancel(id + 1),
    }
}

/// Every strict prefix of a valid body fails to decode (and none panics).
fn assert_prefixes_fail<T: serde::de::DeserializeOwned + std::fmt::Debug>(body: &[u8]) {
    for len in 0..body.len() {
        let result = wire::decode::<T>(&body[..len]);
        assert!(result.is_err(), "prefix of {len} bytes decoded: {result:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn request_frames_round_trip(frame in strategies::request_frame()) {
        let body = wire::encode(&frame).unwrap();
        prop_assert_eq!(wire::decode::<RequestFrame>(&body).unwrap(), frame);
    }

    #[test]
    fn response_frames_round_trip(frame in strategies::response_frame()) {
        let body = wire::encode(&frame).unwrap();
        prop_assert_eq!(wire::decode::<ResponseFrame>(&body).unwrap(), frame);
    }

    #[test]
    fn handshake_bodies_round_trip(hello in strategies::hello(), version in strategies::text(), pid in any::<u32>()) {
        let body = wire::encode(&hello).unwrap();
        prop_assert_eq!(wire::decode::<Hello>(&body).unwrap(), hello);
        let welcome = Welcome { daemon_version: version, daemon_pid: pid, env: vec![("K".into(), "v".into())] };
        let body = wire::encode(&welcome).unwrap();
        prop_assert_eq!(wire::decode::<Welcome>(&body).unwrap(), welcome);
    }

    #[test]
    fn truncated_frames_fail(req in strategies::request_frame(), resp in strategies::response_frame()) {
        assert_prefixes_fail::<RequestFrame>(&wire::encode(&req).unwrap());
        assert_prefixes_fail::<ResponseFrame>(&wire::encode(&resp).unwrap());
    }

    #[test]
    fn garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = wire::decode::<RequestFrame>(&body);
        let _ = wire::decode::<ResponseFrame>(&body);
        let _ = handshake::decode_hello(&body);
        let _ = handshake::decode_welcome(&body);
    }

    /// Corrupting one byte of a valid body reaches deeper than random garbage does.
    #[test]
    fn corrupted_frames_never_panic(
        frame in strategies::response_frame(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut body = wire::encode(&frame).unwrap();
        let i = at.index(body.len());
        body[i] = byte;
        let _ = wire::decode::<ResponseFrame>(&body);
        let _ = wire::decode::<RequestFrame>(&body);
    }
}

#[test]
fn trailing_bytes_are_an_error() {
    let mut body = wire::encode(&cancel_frame(1)).unwrap();
    body.extend_from_slice(&[0, 0]);
    assert!(matches!(
        wire::decode::<RequestFrame>(&body),
        Err(WireError::Trailing(2))
    ));
}

fn unhex(parts: &[&str]) -> Vec<u8> {
    let s: String = parts.concat().split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn huge_length_fields_are_refused_without_allocating() {
    let huge = [
        "fd ffffffffffffffff", // u64::MAX
        "fd 0000000100000000", // 4 GiB
        "fc 40000000",         // 1 GiB
        "fc 00800001",         // MAX_FRAME + 1
    ];
    for len in huge {
        // Response::Output whose chunk list claims `len` chunks.
        let chunks = unhex(&["03 02 00 00 00 00", len, "00 01 41"]);
        // Response::Output with one chunk whose data claims `len` bytes.
        let data = unhex(&["03 02 00 00 00 00 01 00", len, "41"]);
        // Response::Error whose message claims `len` bytes.
        let message = unhex(&["02 08 00", len, "41"]);
        // Response::List claiming `len` records.
        let list = unhex(&["02 04", len]);
        for body in [chunks, data, message, list] {
            let result = wire::decode::<ResponseFrame>(&body);
            assert!(
                matches!(result, Err(WireError::Decode(_))),
                "{}: {result:?}",
                hex(&body)
            );
        }
    }
    // A spawn request whose env claims `u64::MAX` pairs.
    let env = unhex(&["01 00 00 00", "fd ffffffffffffffff"]);
    assert!(wire::decode::<RequestFrame>(&env).is_err());
}

#[test]
fn unknown_variants_are_an_error() {
    // Request has 15 variants, Response 11: the next index is not a message yet.
    assert!(wire::decode::<RequestFrame>(&[0x01, 0x0f]).is_err());
    assert!(wire::decode::<ResponseFrame>(&[0x01, 0x0b]).is_err());
}

#[test]
fn oversized_messages_are_not_encoded() {
    let frame = RequestFrame {
        id: 1,
        request: Request::Stdin(StdinRequest {
            id: 1,
            data: vec![0; MAX_FRAME],
            eof: false,
            token: None,
        }),
    };
    assert!(matches!(wire::encode(&frame), Err(WireError::TooLarge(_))));
}

// ---------------------------------------------------------------------------------------------
// Framing.
// ---------------------------------------------------------------------------------------------

#[test]
fn oversized_length_prefix_is_refused_before_the_body() {
    let mut codec = wire::codec();
    let too_big = u32::try_from(MAX_FRAME + 1).unwrap();
    let mut buf = BytesMut::from(&too_big.to_be_bytes()[..]);
    assert!(codec.decode(&mut buf).is_err());

    // Exactly MAX_FRAME is allowed: the codec waits for the body.
    let limit = u32::try_from(MAX_FRAME).unwrap();
    let mut buf = BytesMut::from(&limit.to_be_bytes()[..]);
    assert!(wire::codec().decode(&mut buf).unwrap().is_none());

    // And the encoder refuses to send what the peer would refuse.
    let body = Bytes::from(vec![0u8; MAX_FRAME + 1]);
    assert!(wire::codec().encode(body, &mut BytesMut::new()).is_err());
}

#[test]
fn partial_frames_wait_for_more() {
    let mut codec = wire::codec();
    let mut buf = BytesMut::new();
    assert!(codec.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(&[0, 0]);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(&[0, 5, b'h', b'e']);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(b"llo");
    assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"hello");
    assert!(buf.is_empty());
}

#[test]
fn frames_back_to_back_decode_in_order() {
    let first = wire::encode(&cancel_frame(1)).unwrap();
    let second = wire::encode(&cancel_frame(2)).unwrap();
    let mut codec = wire::codec();
    let mut buf = BytesMut::new();
    codec.encode(Bytes::from(first), &mut buf).unwrap();
    codec.encode(Bytes::from(second), &mut buf).unwrap();
    codec.encode(Bytes::new(), &mut buf).unwrap();

    let a = codec.decode(&mut buf).unwrap().unwrap();
    let b = codec.decode(&mut buf).unwrap().unwrap();
    let empty = codec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(wire::decode::<RequestFrame>(&a).unwrap(), cancel_frame(1));
    assert_eq!(wire::decode::<RequestFrame>(&b).unwrap(), cancel_frame(2));
    assert!(empty.is_empty());
    assert!(codec.decode(&mut buf).unwrap().is_none());
}
