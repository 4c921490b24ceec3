//! What the daemon refuses before anything runs, and that a refusal costs only its own
//! request or connection: invalid spawns (`handlers/validate.rs`), hellos it cannot serve
//! (another protocol version, an environment no process can hold, a first frame over its
//! limit: `conn/hello.rs`), and frames it cannot read (`conn/`).

use cuba_protocol::client::ClientError;
use cuba_protocol::handshake::{self, HandshakeError};
use cuba_protocol::{
    wire, ErrorKind, Hello, ListRequest, Request, RequestFrame, Response, SpawnRequest, TtySize,
    PROTOCOL_VERSION,
};

use crate::fixture::{bounded, client_info, run, Daemon};
use crate::os::{lines, text};
use crate::raw;

/// The daemon still serves a new client: a command runs and answers.
async fn still_serves(d: &Daemon) {
    let c = d.client().await;
    let w = run(&c, d.req(&text::echo("served"))).await;
    assert_eq!(lines(&w.output.bytes()), ["served"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_spawns_are_bad_requests_that_start_nothing() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let with = |f: &dyn Fn(&mut SpawnRequest)| {
        let mut r = d.req(&text::echo("never"));
        f(&mut r);
        r
    };
    let cases: Vec<(SpawnRequest, &str)> = vec![
        (d.req("echo a\0b"), "NUL byte"),
        (d.req("   "), "command is empty"),
        (
            with(&|r| r.env = vec![("A=B".into(), "x".into())]),
            r#""A=B" has '=' in its name"#,
        ),
        (
            with(&|r| r.env = vec![("".into(), "x".into())]),
            "has an empty name",
        ),
        (
            with(&|r| r.env = vec![("CUBA_V".into(), "a\0b".into())]),
            r#""CUBA_V" has a NUL byte in its value"#,
        ),
        (
            with(&|r| r.name = Some("n".repeat(257))),
            "name is longer than 256 bytes",
        ),
        (
            with(&|r| r.cwd = Some("a\0b".into())),
            "cwd contains a NUL byte",
        ),
        (
            with(&|r| r.shell = Some(String::new())),
            "shell must be a non-empty path",
        ),
        (
            with(&|r| r.tty = Some(TtySize { cols: 0, rows: 10 })),
            "at least 1",
        ),
    ];
    for (req, why) in cases {
        for ensure in [false, true] {
            let mut req = req.clone();
            let answer = match ensure {
                false => bounded("spawn", c.spawn(req)).await.map(|_| ()),
                true => {
                    req.name.get_or_insert_with(|| "ensured".into());
                    bounded("ensure", c.ensure(req)).await.map(|_| ())
                }
            };
            let e = answer.expect_err(why);
            assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{why}: {e}");
            assert!(e.to_string().contains(why), "{why}: {e}");
        }
        let run = cuba_protocol::RunRequest {
            spawn: req.clone(),
            wait: cuba_protocol::WaitSpec::exit(1000, 1024),
        };
        let e = bounded("run", c.run(run)).await.err().expect(why);
        assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{why}: {e}");
    }
    let all = bounded("list", c.list(ListRequest::default()))
        .await
        .unwrap();
    assert!(all.is_empty(), "a refused request left a row: {all:?}");
    still_serves(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_of_another_protocol_version_is_refused_and_the_next_client_served() {
    let d = Daemon::start().await;
    let mut s = raw::connect(d.socket()).await;
    let other = PROTOCOL_VERSION + 1;
    let mut hello = handshake::MAGIC.to_vec();
    hello.extend_from_slice(&other.to_be_bytes());
    hello.extend_from_slice(b"a body of a version this daemon does not know");
    raw::send_frame(&mut s, &hello).await;
    let reply = raw::read_frame(&mut s)
        .await
        .expect("no answer to the hello");
    match handshake::decode_welcome(&reply) {
        Err(HandshakeError::Refused(why)) => {
            let speaks = format!("client speaks protocol {other}");
            assert!(why.contains(&speaks), "{why}");
            assert!(why.contains(&format!("speaks {PROTOCOL_VERSION}")), "{why}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(
        raw::read_frame(&mut s).await.is_none(),
        "the connection stayed open"
    );
    still_serves(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_with_an_environment_no_process_can_hold_is_refused() {
    let d = Daemon::start().await;
    let refused = |mut env: cuba_protocol::Env| {
        let mut client = client_info();
        client.env.append(&mut env);
        d.connect_as(Hello {
            client,
            remote: false,
        })
    };
    let named = vec![("A=B".into(), "x".into())];
    let nul = vec![("CUBA_NUL".into(), "a\0b".into())];
    let many = (0..4097)
        .map(|i| (format!("V{i}").into(), "x".into()))
        .collect();
    for (env, why) in [
        (
            named,
            r#"the client's environment variable "A=B" has '=' in its name"#,
        ),
        (nul, r#""CUBA_NUL" has a NUL byte in its value"#),
        (many, "more than the 4096 cubad accepts"),
    ] {
        match refused(env).await {
            Err(ClientError::Handshake(HandshakeError::Refused(reason))) => {
                assert!(reason.contains(why), "{reason}")
            }
            Err(e) => panic!("{why}: expected a refusal, got {e}"),
            Ok(_) => panic!("{why}: the hello was welcomed"),
        }
    }
    still_serves(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_frame_over_the_hello_limit_is_refused_unread() {
    let d = Daemon::start().await;
    let mut s = raw::connect(d.socket()).await;
    // Only the length prefix: the limit is checked on it, before a byte of the body is read.
    raw::send(&mut s, 1120 * 1024 + 1, b"CUBA").await;
    let reply = raw::read_frame(&mut s)
        .await
        .expect("no answer to the hello");
    match handshake::decode_welcome(&reply) {
        Err(HandshakeError::Refused(why)) => {
            assert!(
                why.contains("larger than the 1120 KiB cubad accepts"),
                "{why}"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    still_serves(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_the_limit_closes_its_connection_only() {
    let d = Daemon::start().await;
    let bystander = d.client().await;
    let mut s = raw::connect(d.socket()).await;
    raw::greet(&mut s).await;
    raw::send(&mut s, wire::MAX_FRAME + 1, &[]).await;
    let answer = raw::read_response(&mut s).await;
    match answer.response {
        Response::Error(e) => {
            assert_eq!((answer.id, e.kind), (0, ErrorKind::BadRequest), "{e:?}");
            assert!(e.message.contains("unreadable frame"), "{e:?}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
    assert!(
        raw::read_frame(&mut s).await.is_none(),
        "the connection stayed open"
    );
    // Another connection, open all along, is not touched.
    bounded("status", bystander.status()).await.unwrap();
    still_serves(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_decode_is_answered_and_the_connection_serves_on() {
    let d = Daemon::start().await;
    let mut s = raw::connect(d.socket()).await;
    raw::greet(&mut s).await;
    raw::send_frame(&mut s, &[0xff; 16]).await;
    let answer = raw::read_response(&mut s).await;
    match answer.response {
        Response::Error(e) => {
            assert_eq!((answer.id, e.kind), (0, ErrorKind::BadRequest), "{e:?}")
        }
        other => panic!("expected an error, got {other:?}"),
    }
    let status = RequestFrame {
        id: 7,
        request: Request::DaemonStatus,
    };
    raw::send_frame(&mut s, &wire::encode(&status).unwrap()).await;
    let answer = raw::read_response(&mut s).await;
    assert_eq!(answer.id, 7);
    match answer.response {
        Response::DaemonStatus(st) => assert_eq!(st.pid, d.pid()),
        other => panic!("expected the status, got {other:?}"),
    }
}
