//! Golden bytes of the wire format: the exact encoding of representative messages and frames.

#![allow(clippy::unwrap_used)]

use std::ffi::OsString;

use bytes::{Bytes, BytesMut};
use cuba_protocol::handshake::{self, HelloOutcome};
use cuba_protocol::wire;
use cuba_protocol::*;
use tokio_util::codec::Encoder;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Asserts that `bytes` are exactly the concatenated hex `parts` (spaces ignored).
fn assert_bytes(bytes: &[u8], parts: &[&str]) {
    let expected: String = parts.concat().split_whitespace().collect();
    assert_eq!(hex(bytes), expected);
}

// ---------------------------------------------------------------------------------------------
// Golden bytes.
//
// ANY CHANGE TO THE EXPECTED BYTES BELOW IS A WIRE-FORMAT CHANGE: it must bump
// `cuba_protocol::PROTOCOL_VERSION`, or old clients and daemons will misread each other.
//
// The encoding is bincode 2 "standard" with big-endian varints: an integer below 251 is one
// byte; 0xfb / 0xfc / 0xfd prefix a big-endian u16 / u32 / u64. Signed integers are zigzagged.
// Enum variants are their index (varint) then their fields; `Option` is 00 (None) or 01 + value;
// strings and sequences are a varint length then the contents; an `OsString` is a byte string
// (`os_text`: the OS's bytes on Unix, WTF-8 on Windows), so length + bytes.
// ---------------------------------------------------------------------------------------------

fn spawn_frame() -> RequestFrame {
    RequestFrame {
        id: 1,
        request: Request::Spawn(SpawnRequest {
            command: "echo hi".into(),
            cwd: Some("/tmp".into()),
            env: vec![(OsString::from("A"), OsString::from("b"))],
            shell: None,
            stdin: Some(vec![0xff, 0x00]),
            close_stdin: true,
            timeout_ms: Some(300),
            name: Some("é".into()),
            side_effects: vec!["NONE".into()],
            tty: Some(TtySize { cols: 80, rows: 24 }),
            session: Some("dev".into()),
            token: Some(RequestToken([0xab; 16])),
            port: Some(PortWish::Exact(8080)),
        }),
    }
}

fn output_frame() -> ResponseFrame {
    let chunks = vec![
        Chunk {
            stream: Stream::Stdout,
            data: b"hi\n".to_vec(),
        },
        Chunk {
            stream: Stream::Stderr,
            data: vec![0xff, 0xfe],
        },
    ];
    ResponseFrame {
        id: 3,
        response: Response::Output(OutputRead {
            start: 0,
            next: 5,
            dropped: 0,
            total: 1000,
            chunks,
        }),
    }
}

fn hello() -> Hello {
    Hello {
        client: ClientInfo {
            kind: ClientKind::Cli,
            name: "cubactl".into(),
            pid: 4242,
            cwd: "/w".into(),
            env: vec![("K".into(), "v".into())],
        },
        remote: true,
    }
}

fn welcome() -> Welcome {
    Welcome {
        daemon_version: "0.1.0".into(),
        daemon_pid: 99,
        env: Vec::new(),
    }
}

fn golden_request(frame: &RequestFrame, parts: &[&str]) {
    let body = wire::encode(frame).unwrap();
    assert_bytes(&body, parts);
    assert_eq!(&wire::decode::<RequestFrame>(&body).unwrap(), frame);
}

fn golden_response(frame: &ResponseFrame, parts: &[&str]) {
    let body = wire::encode(frame).unwrap();
    assert_bytes(&body, parts);
    assert_eq!(&wire::decode::<ResponseFrame>(&body).unwrap(), frame);
}

#[test]
fn golden_spawn_request() {
    golden_request(
        &spawn_frame(),
        &[
            "01",                                  // id 1
            "00",                                  // Request::Spawn
            "07 6563686f206869",                   // command "echo hi"
            "01 04 2f746d70",                      // cwd Some("/tmp")
            "01 01 41 01 62",                      // env: 1 pair, ("A", "b")
            "00",                                  // shell None
            "01 02 ff00",                          // stdin Some([ff, 00])
            "01",                                  // close_stdin true
            "01 fb 012c",                          // timeout_ms Some(300): u16 marker, big-endian
            "01 02 c3a9",                          // name Some("é"), UTF-8
            "01 04 4e4f4e45",                      // side_effects: 1 entry, "NONE"
            "01 50 18",                            // tty Some(80 cols, 24 rows)
            "01 03 646576",                        // session Some("dev")
            "01 abababababababababababababababab", // token Some: 16 bytes, no length
            "01 01 fb 1f90",                       // port Some(Exact(8080))
        ],
    );
}

#[test]
fn golden_cancel_request() {
    let frame = RequestFrame {
        id: 70_000,
        request: Request::Cancel(7),
    };
    golden_request(
        &frame,
        &[
            "fc 00011170", // id 70000: u32 marker, big-endian
            "09",          // Request::Cancel
            "07",          // the cancelled request's id
        ],
    );
}

#[test]
fn golden_signal_request() {
    let frame = RequestFrame {
        id: 4,
        request: Request::Signal(SignalRequest {
            id: 9,
            signal: Signal::Other(-11),
            escalate: true,
            grace_ms: None,
            wait: false,
        }),
    };
    golden_request(
        &frame,
        &[
            "04",    // frame id
            "05",    // Request::Signal
            "09",    // process id
            "09 15", // Signal::Other(-11), zigzag: 21
            "01",    // escalate
            "00",    // grace_ms None
            "00",    // wait false
        ],
    );
}

#[test]
fn golden_list_request_and_listing() {
    let frame = RequestFrame {
        id: 3,
        request: Request::List(ListRequest {
            state: Some(ProcState::Running),
            owner: None,
            name: Some("web".into()),
            finished: Some(5),
            running: Some(50),
        }),
    };
    golden_request(
        &frame,
        &[
            "03",           // frame id
            "06",           // Request::List
            "01 00",        // state Some(Running)
            "00",           // owner None
            "01 03 776562", // name Some("web")
            "01 05",        // finished Some(5)
            "01 32",        // running Some(50)
        ],
    );
    let frame = ResponseFrame {
        id: 3,
        response: Response::List(Listing {
            processes: Vec::new(),
            hidden: 300,
            hidden_running: 7,
            budgets: vec![BudgetUse {
                agent: "a".into(),
                budget: Budget {
                    cpu_millis: Some(500),
                    memory: None,
                    pids: Some(9),
                },
                cpu_millis: None,
                memory: None,
                pids: Some(2),
                throttled_ms: None,
                last_hit: None,
            }],
        }),
    };
    golden_response(
        &frame,
        &[
            "03",                  // id
            "04",                  // Response::List
            "00",                  // no rows
            "fb 012c",             // hidden 300
            "07",                  // hidden_running 7
            "01 01 61",            // one budget, agent "a"
            "01 fb 01f4 00 01 09", // cpu 500, memory None, pids 9
            "00 00 01 02 00 00",   // cpu, memory None, pids 2, throttled and last hit None
        ],
    );
}

#[test]
fn golden_error_response() {
    let frame = ResponseFrame {
        id: 2,
        response: Response::Error(ProtocolError::new(ErrorKind::NotFound, "no process 9")),
    };
    golden_response(
        &frame,
        &[
            "02",                          // id
            "08",                          // Response::Error
            "00",                          // ErrorKind::NotFound
            "0c 6e6f2070726f636573732039", // "no process 9"
            "00",                          // reason: none
        ],
    );
    // A reason a client branches on, after the message.
    let frame = ResponseFrame {
        id: 3,
        response: Response::Error(
            ProtocolError::new(ErrorKind::InvalidState, "no tty").because(ErrorReason::NoTerminal),
        ),
    };
    golden_response(
        &frame,
        &[
            "03",              // id
            "08",              // Response::Error
            "05",              // ErrorKind::InvalidState
            "06 6e6f20747479", // "no tty"
            "01 00",           // Some(ErrorReason::NoTerminal)
        ],
    );
}

#[test]
fn golden_token_check_and_its_verdict() {
    let frame = RequestFrame {
        id: 3,
        request: Request::TokenCheck("ab".into()),
    };
    golden_request(
        &frame,
        &[
            "03",      // id
            "1d",      // Request::TokenCheck
            "02 6162", // the token's hash, as text
        ],
    );
    let frame = RequestFrame {
        id: 1,
        request: Request::Authorize(Verb::HttpStart),
    };
    golden_request(&frame, &["01", "1f", "00"]); // Request::Authorize(Verb::HttpStart)
    let frame = ResponseFrame {
        id: 3,
        response: Response::Token(TokenVerdict::Valid(TokenInfo {
            name: "p".into(),
            created: 5,
            expires: None,
            hosts: Some(vec!["h".into()]),
            allow: None,
            roots: None,
            budget: None,
        })),
    };
    golden_response(
        &frame,
        &[
            "03",          // id
            "12",          // Response::Token
            "00",          // TokenVerdict::Valid
            "01 70",       // name "p"
            "05",          // created
            "00",          // expires None
            "01 01 01 68", // hosts Some(["h"])
            "00 00",       // allow, roots None
            "00",          // budget None
        ],
    );
}

#[test]
fn golden_closing_notice() {
    let frame = ResponseFrame {
        id: 0,
        response: Response::Closing {
            reason: "idle".into(),
        },
    };
    golden_response(
        &frame,
        &[
            "00",          // id 0: the connection itself
            "0c",          // Response::Closing
            "04 69646c65", // reason "idle"
        ],
    );
}

#[test]
fn golden_output_response() {
    golden_response(
        &output_frame(),
        &[
            "03",           // id
            "02",           // Response::Output
            "00 05 00",     // start 0, next 5, dropped 0
            "fb 03e8",      // total 1000
            "02",           // 2 chunks
            "00 03 68690a", // Stdout "hi\n"
            "01 02 fffe",   // Stderr [ff, fe]
        ],
    );
}

#[test]
fn golden_events_request_and_batch() {
    let request = RequestFrame {
        id: 7,
        request: Request::Events(EventsRequest {
            since: Some(5),
            follow: true,
            id: None,
            max: 0,
        }),
    };
    golden_request(
        &request,
        &[
            "07",    // id
            "20",    // Request::Events (32)
            "01 05", // since Some(5)
            "01",    // follow
            "00",    // id None
            "00",    // max 0
        ],
    );
    let batch = ResponseFrame {
        id: 4,
        response: Response::Events(EventBatch {
            events: vec![Event {
                seq: 9,
                at_ms: 100,
                id: Some(3),
                kind: EventKind::PortOpened { port: 8080 },
            }],
            next: 10,
            lost: 0,
        }),
    };
    golden_response(
        &batch,
        &[
            "04",      // id
            "14",      // Response::Events (20)
            "01",      // one event
            "09 64",   // seq 9, at_ms 100
            "01 03",   // id Some(3)
            "04",      // EventKind::PortOpened
            "fb 1f90", // port 8080
            "0a 00",   // next 10, lost 0
        ],
    );
}

#[test]
fn golden_error_marks() {
    let marks = ErrorMarks {
        first: ErrorMark {
            cursor: 300,
            line: "e".into(),
            location: Some("a:3".into()),
        },
        last: ErrorMark {
            cursor: 9,
            line: String::new(),
            location: None,
        },
        count: 2,
    };
    let body = wire::encode(&marks).unwrap();
    assert_bytes(
        &body,
        &[
            "fb 012c 01 65 01 03 613a33", // first: cursor 300, line "e", location Some("a:3")
            "09 00 00",                   // last: cursor 9, line "", location None
            "02",                         // count 2
        ],
    );
    assert_eq!(wire::decode::<ErrorMarks>(&body).unwrap(), marks);
}

#[test]
fn golden_handshake_hello() {
    let frame = handshake::encode_hello(&hello()).unwrap();
    assert_bytes(
        &frame,
        &[
            "43554241",          // "CUBA"
            "00000017",          // protocol version 23, fixed u32 big-endian
            "01",                // ClientKind::Cli
            "07 6375626163746c", // name "cubactl"
            "fb 1092",           // pid 4242
            "02 2f77",           // cwd "/w"
            "01 01 4b 01 76",    // env [("K", "v")]
            "01",                // remote: true
        ],
    );
    assert!(
        matches!(handshake::decode_hello(&frame).unwrap(), HelloOutcome::Ok(h) if h == hello())
    );
}

#[test]
fn golden_handshake_welcome_and_refusal() {
    let frame = handshake::encode_welcome(&welcome()).unwrap();
    assert_bytes(
        &frame,
        &[
            "43554241",      // "CUBA"
            "00000017",      // protocol version 23
            "00000063",      // daemon pid 99, fixed u32 big-endian
            "00",            // status: accepted
            "05 302e312e30", // daemon_version "0.1.0"
            "63",            // daemon_pid 99 again, varint
            "00",            // env: none (a local client)
        ],
    );
    assert_eq!(handshake::decode_welcome(&frame).unwrap(), welcome());

    let refusal = handshake::encode_refusal(99, "no");
    assert_bytes(&refusal, &["43554241 00000017 00000063", "01", "6e6f"]);
    // Another user's peer: status 2, known by it and not by the reason's words.
    let theirs = handshake::encode_refusal_of_another_user(99, "no");
    assert_bytes(&theirs, &["43554241 00000017 00000063", "02", "6e6f"]);
    assert!(matches!(
        handshake::decode_welcome(&theirs),
        Err(handshake::HandshakeError::AnotherUser(r)) if r == "no"
    ));
}

#[test]
fn golden_length_prefix() {
    let mut buf = BytesMut::new();
    wire::codec()
        .encode(Bytes::from_static(b"abc"), &mut buf)
        .unwrap();
    assert_bytes(&buf, &["00000003", "616263"]);
}

/// No strict prefix of a golden body decodes.
#[test]
fn golden_bodies_truncated_fail() {
    let body = wire::encode(&spawn_frame()).unwrap();
    for len in 0..body.len() {
        assert!(wire::decode::<RequestFrame>(&body[..len]).is_err(), "{len}");
    }
    let body = wire::encode(&output_frame()).unwrap();
    for len in 0..body.len() {
        assert!(
            wire::decode::<ResponseFrame>(&body[..len]).is_err(),
            "{len}"
        );
    }
}
