//! The HTTP endpoint shared by several tokens: every session counted and bound to its token
//! however its `initialize` is spelled, and however many arrive at once; per-token bounds on
//! requests in flight, connections and streams, so one token cannot take another's places or
//! meet the daemon's own bound; a `wait` whose client went away cancelled in its session, a
//! `run` not (it holds its places until it ends); and a revoked or expired token's streams,
//! sessions and calls ended within seconds.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuba_tests::http::{HttpServer, LEGACY};
use cuba_tests::{bounded, TestDaemon, STEP};
use serde_json::json;
use tokio::io::AsyncReadExt;

/// An `initialize` whose method name is JSON-escaped (`\u0069` is `i`).
fn escaped_initialize() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"\u0069nitialize","params":{{"protocolVersion":"{LEGACY}","capabilities":{{}},"clientInfo":{{"name":"x","version":"0"}}}}}}"#
    )
}

#[tokio::test]
async fn an_escaped_initialize_opens_a_session_counted_and_bound_to_its_token() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "max_sessions_per_token = 2", "").await;
    let owner = s.token(&["create", "owner"]).await;
    let other = s.token(&["create", "other"]).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = s.post(&owner, None, &escaped_initialize()).await;
        assert_eq!(r.status, 200, "{r:?}");
        ids.push(r.header("mcp-session-id").unwrap().to_string());
    }
    // The third is over the bound, however it is spelled.
    let third = s.post(&owner, None, &escaped_initialize()).await;
    assert_eq!(third.status, 429, "{third:?}");
    assert!(
        third.body.contains("max_sessions_per_token = 2"),
        "{third:?}"
    );
    // The sessions are the owner's: another token finds none.
    let stolen = s.call(&other, &ids[0], "list_processes", json!({})).await;
    assert_eq!(stolen.status, 404, "{stolen:?}");
    let own = s.call(&owner, &ids[0], "list_processes", json!({})).await;
    assert_eq!(own.status, 200, "{own:?}");
}

#[tokio::test]
async fn initializes_sent_at_once_never_pass_the_sessions_bound() {
    let d = TestDaemon::start().await;
    let s = Arc::new(HttpServer::start(&d, "max_sessions_per_token = 8", "").await);
    let token = s.token(&["create", "racer"]).await;
    let init = json!({"protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "x", "version": "0"}});
    let mut sent = Vec::new();
    for _ in 0..60 {
        let (s, token, init) = (s.clone(), token.clone(), init.clone());
        sent.push(tokio::spawn(async move {
            s.rpc(&token, None, "initialize", init).await.status
        }));
    }
    let mut statuses = Vec::new();
    for t in sent {
        statuses.push(bounded("60 initializes", STEP, t).await.unwrap());
    }
    let opened = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(opened, 8, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
}

#[tokio::test]
async fn one_token_cannot_take_the_places_of_another() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(
        &d,
        "max_in_flight = 16\nmax_in_flight_per_token = 4\nmax_connections_per_token = 6\n\
         max_streams_per_token = 2",
        "",
    )
    .await;
    let greedy = s.token(&["create", "greedy"]).await;
    let modest = s.token(&["create", "modest"]).await;
    let g = s.session(&greedy).await;
    let m = s.session(&modest).await;
    let started = s
        .call(&greedy, &g, "start", json!({"command": "sleep 60"}))
        .await;
    assert!(started.text().contains("id:1"), "{started:?}");

    // Requests in flight: four endless waits fill the token's share; its fifth is refused.
    let endless = json!({"id": 1, "until": "never", "timeout_ms": 60000});
    let mut waits = Vec::new();
    for _ in 0..4 {
        waits.push(s.begin(&greedy, &g, "wait", endless.clone()).await.unwrap());
    }
    let fifth = s.call(&greedy, &g, "list_processes", json!({})).await;
    assert_eq!(fifth.status, 429, "{fifth:?}");
    assert!(
        fifth.body.contains("max_in_flight_per_token = 4"),
        "{fifth:?}"
    );
    let served = s.call(&modest, &m, "list_processes", json!({})).await;
    assert_eq!(served.status, 200, "{served:?}");

    // Streams: two GETs fill the token's share (six connections now); a seventh connection
    // of the token is refused, naming its bound, and the other token is still served.
    let _one = s.stream(&greedy, &g).await.unwrap();
    let _two = s.stream(&greedy, &g).await.unwrap();
    let seventh = s.call(&greedy, &g, "list_processes", json!({})).await;
    assert_eq!(seventh.status, 429, "{seventh:?}");
    assert!(
        seventh.body.contains("max_connections_per_token = 6"),
        "{seventh:?}"
    );
    let served = s.call(&modest, &m, "list_processes", json!({})).await;
    assert_eq!(served.status, 200, "{served:?}");
    let _modest_stream = s.stream(&modest, &m).await.unwrap();

    // A wait's connection gone (once the endpoint sees it close): a third stream has a
    // connection, and is refused as a stream.
    drop(waits.pop());
    let deadline = Instant::now() + STEP;
    let third = loop {
        let reply = s.stream(&greedy, &g).await.unwrap_err();
        assert_eq!(reply.status, 429, "{reply:?}");
        if !reply.body.contains("max_connections_per_token") || Instant::now() > deadline {
            break reply;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        third.body.contains("max_streams_per_token = 2"),
        "{third:?}"
    );
}

#[tokio::test]
async fn a_token_is_refused_by_its_own_bound_before_the_daemons() {
    let d = TestDaemon::start().await;
    let s = Arc::new(HttpServer::start(&d, "", "").await);
    let token = s.token(&["create", "busy"]).await;
    let session = s.session(&token).await;
    let started = s
        .call(&token, &session, "start", json!({"command": "sleep 60"}))
        .await;
    assert!(started.text().contains("id:1"), "{started:?}");
    // 110 waits at once, of one token: 100 (max_in_flight_per_token's default) are served,
    // every one to its end and none with the daemon's LIMIT; the others are refused, naming
    // the setting.
    let wait = json!({"id": 1, "until": "never", "timeout_ms": 3000});
    let mut begun = Vec::new();
    for _ in 0..110 {
        let (s, token, session, wait) = (s.clone(), token.clone(), session.clone(), wait.clone());
        begun.push(tokio::spawn(async move {
            match s.begin(&token, &session, "wait", wait).await {
                Ok(conn) => Ok(read_reply_body(conn).await),
                Err(reply) => Err(reply),
            }
        }));
    }
    let (mut served, mut refused) = (0, 0);
    for b in begun {
        match bounded("110 waits", STEP, b).await.unwrap() {
            Ok(body) => {
                assert!(!body.contains("LIMIT"), "{body}");
                assert!(body.contains("\"result\""), "{body}");
                served += 1;
            }
            Err(reply) => {
                assert_eq!(reply.status, 429, "{reply:?}");
                assert!(
                    reply.body.contains("max_in_flight_per_token = 100"),
                    "{reply:?}"
                );
                refused += 1;
            }
        }
    }
    assert_eq!((served, refused), (100, 10));
}

/// The rest of a chunked reply whose head was read: its body, to its last chunk (or the end
/// of the connection).
async fn read_reply_body(mut conn: tokio::net::TcpStream) -> String {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.ends_with(b"\r\n0\r\n\r\n") && !raw.starts_with(b"0\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

#[tokio::test]
async fn a_call_whose_client_went_away_is_cancelled_in_its_session() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "", "").await;
    let token = s.token(&["create", "leaver"]).await;
    let session = s.session(&token).await;
    let started = s
        .call(&token, &session, "start", json!({"command": "sleep 120"}))
        .await;
    assert!(started.text().contains("id:1"), "{started:?}");
    // Twice, 100 endless waits whose clients go away: were they not cancelled, their 200
    // requests would hold the token's daemon connection, and the next 100 would pass its 256.
    let endless = json!({"id": 1, "until": "never", "timeout_ms": 100000});
    for _ in 0..2 {
        let mut batch = Vec::new();
        for _ in 0..100 {
            batch.push(
                s.begin(&token, &session, "wait", endless.clone())
                    .await
                    .unwrap(),
            );
        }
        // The calls reach the daemon within milliseconds of their reply's head; nothing tells
        // the client when. Were one not there yet, it would not count: the test would pass
        // without cancellation, never fail with it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(batch);
    }
    let short = json!({"id": 1, "until": "never", "timeout_ms": 1000});
    let mut last = Vec::new();
    let deadline = tokio::time::Instant::now() + STEP;
    for _ in 0..100 {
        let conn = loop {
            match s.begin(&token, &session, "wait", short.clone()).await {
                Ok(conn) => break conn,
                // The endpoint gives a dropped client's place back once it has seen the
                // connection close, a moment after the drop: the refusal says so, and the
                // place comes back (what is tested is the daemon's side, below).
                Err(r) if r.status == 429 && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                Err(r) => panic!("{r:?}"),
            }
        };
        last.push(tokio::spawn(read_reply_body(conn)));
    }
    for l in last {
        let body = bounded("the last 100 waits", STEP, l).await.unwrap();
        assert!(
            !body.contains("LIMIT"),
            "a dropped call was not cancelled: {body}"
        );
        assert!(body.contains("\"result\""), "{body}");
    }
}

#[tokio::test]
async fn a_revoked_token_loses_its_streams_sessions_and_calls_within_seconds() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "", "").await;
    let token = s.token(&["create", "leaving"]).await;
    let session = s.session(&token).await;
    let started = s
        .call(
            &token,
            &session,
            "start",
            json!({"command": "sleep 1; echo late-output; sleep 60"}),
        )
        .await;
    assert!(started.text().contains("id:1"), "{started:?}");
    let stream = s.stream(&token, &session).await.unwrap();
    let wait = json!({"id": 1, "until": "never", "timeout_ms": 60000});
    let call = s.begin(&token, &session, "wait", wait).await.unwrap();
    s.token(&["revoke", "leaving"]).await;
    let revoked = Instant::now();
    // The stream and the call end (the endpoint checks every 2 s), the call with no result:
    // not its output, delivered after the revocation.
    let ends = Duration::from_secs(8);
    let streamed = bounded("the stream to end", ends, read_reply_body(stream)).await;
    let answered = bounded("the call to end", ends, read_reply_body(call)).await;
    assert!(revoked.elapsed() < ends, "{:?}", revoked.elapsed());
    assert!(!answered.contains("\"result\""), "{answered}");
    assert!(!streamed.contains("late-output"), "{streamed}");
    // The session is gone, for any token.
    let other = s.token(&["create", "next"]).await;
    let r = s.call(&other, &session, "list_processes", json!({})).await;
    assert_eq!(r.status, 404, "{r:?}");
}

#[tokio::test]
async fn a_run_whose_client_went_away_runs_on_holding_its_place_until_it_ends() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "max_in_flight_per_token = 2", "").await;
    let token = s.token(&["create", "runner"]).await;
    let session = s.session(&token).await;
    // A disconnection is no cancellation of a run (MCP 2025-06-18; a cancelled run stops its
    // process): it runs on, and its call is still at the daemon, counted against the token.
    let run = json!({"command": "sleep 3; echo finished", "yield_ms": 60000});
    drop(s.begin(&token, &session, "run", run).await.unwrap());
    // The wait must find the process: on a loaded machine the run's spawn may still be on its
    // way, and a wait for an id not yet there ends at once, giving its place back.
    let c = d.client().await;
    let started = cuba_tests::wait_for_async(|| async { c.info(1).await.is_ok() }, STEP).await;
    assert!(started, "the run never started");
    let endless = json!({"id": 1, "until": "never", "timeout_ms": 60000});
    let _wait = s.begin(&token, &session, "wait", endless).await.unwrap();
    let full = s.call(&token, &session, "list_processes", json!({})).await;
    assert_eq!(full.status, 429, "{full:?}");
    assert!(
        full.body.contains("max_in_flight_per_token = 2"),
        "{full:?}"
    );
    // Its end gives the place back; it ended by itself, not stopped.
    let freed = cuba_tests::wait_for_async(
        || async {
            s.call(&token, &session, "list_processes", json!({}))
                .await
                .status
                == 200
        },
        STEP,
    )
    .await;
    assert!(freed, "the run's place was never given back");
    let status = s.call(&token, &session, "status", json!({"id": 1})).await;
    let text = status.text();
    assert!(
        text.contains("exit:0") && text.contains("finished"),
        "{text}"
    );
}

#[tokio::test]
async fn an_expired_token_loses_its_stream_within_seconds() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "", "").await;
    let token = s.token(&["create", "lapsing", "--expires", "1h"]).await;
    let session = s.session(&token).await;
    let stream = s.stream(&token, &session).await.unwrap();
    // Its expiry moved into the past, put in effect as a person does (`daemon reload`).
    let text = std::fs::read_to_string(s.tokens_file()).unwrap();
    let past: Vec<String> = text
        .lines()
        .map(|l| match l.starts_with("expires = ") {
            true => "expires = 1".to_string(),
            false => l.to_string(),
        })
        .collect();
    std::fs::write(s.tokens_file(), past.join("\n")).unwrap();
    let reload = d.cubactl(&["daemon", "reload"]).output().await.unwrap();
    assert!(reload.status.success(), "{reload:?}");
    let expired = Instant::now();
    let ends = Duration::from_secs(8);
    bounded("the stream to end", ends, read_reply_body(stream)).await;
    assert!(expired.elapsed() < ends, "{:?}", expired.elapsed());
}
