//! CONNECT tunnels and plain requests.
#![allow(clippy::unwrap_used)]

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

#[tokio::test]
async fn connect_tunnels_both_ways_sending_early_bytes_first() {
    let up = echo().await;
    let proxy = Proxy::start(&["127.0.0.1"], &[], &[]).await;
    let mut c = tunnel(&proxy, &up.to_string(), b"early").await;
    expect_echo(&mut c, b"early").await;
    c.write_all(b" and more").await.unwrap();
    expect_echo(&mut c, b" and more").await;
    // The client closes its side; the upstream does then; the tunnel ends.
    c.shutdown().await.unwrap();
    let mut rest = Vec::new();
    within(c.read_to_end(&mut rest)).await.unwrap();
    assert!(rest.is_empty());
    let audits = proxy.audits();
    assert_eq!(
        audits,
        [(
            up.to_string(),
            Via::Connect,
            "allowed".to_string(),
            Some(up)
        )]
    );
}

#[tokio::test]
async fn a_denied_connect_is_a_403_naming_the_rule() {
    let proxy = Proxy::start(&["*"], &["*.example.com"], &[]).await;
    let answer = proxy
        .exchange(b"CONNECT a.Example.com:443 HTTP/1.1\r\n\r\n")
        .await;
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(answer.contains("\r\nX-Cuba-Exec: denied\r\n"), "{answer}");
    let reason = "denied by \"*.example.com\"";
    assert!(
        answer.ends_with(&format!(
            "\r\n\r\ncuba-exec: a.example.com:443 refused: {reason}\n"
        )),
        "{answer}"
    );
    let audits = proxy.audits();
    let want = (
        "a.example.com:443".to_string(),
        Via::Connect,
        format!("denied: {reason}"),
        None,
    );
    assert_eq!(audits, [want]);
}

#[tokio::test]
async fn resolve_and_connect_failures_are_a_502() {
    let proxy = Proxy::start(&["127.0.0.1", "nothing.invalid"], &[], &[]).await;
    let port = closed_port().await;
    let answer = proxy
        .exchange(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await;
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains(&format!(
            "cuba-exec: 127.0.0.1:{port} failed: cannot connect"
        )),
        "{answer}"
    );
    let answer = proxy
        .exchange(b"CONNECT nothing.invalid:443 HTTP/1.1\r\n\r\n")
        .await;
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains("cannot resolve nothing.invalid"),
        "{answer}"
    );
    let audits = proxy.audits();
    assert_eq!(audits.len(), 2);
    assert!(
        audits
            .iter()
            .all(|a| a.2.starts_with("failed: ") && a.3.is_none()),
        "{audits:?}"
    );
}

#[tokio::test]
async fn loopback_needs_a_rule_naming_the_host_exactly() {
    let up = echo().await;
    let port = up.port();
    let wide = Proxy::start(&["*", "*.localhost"], &[], &[]).await;
    for host in ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]"] {
        let answer = wide
            .exchange(format!("CONNECT {host}:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await;
        assert!(
            answer.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{host}: {answer}"
        );
        assert!(answer.contains("is a local address"), "{answer}");
    }
    let mut socks = wide.client().await;
    let mut req = vec![5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1];
    req.extend_from_slice(&port.to_be_bytes());
    socks.write_all(&req).await.unwrap();
    let mut answer = Vec::new();
    within(socks.read_to_end(&mut answer)).await.unwrap();
    assert_eq!(answer, [5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    let audits = wide.audits();
    assert_eq!(audits.len(), 4);
    assert!(
        audits
            .iter()
            .all(|a| a.2.contains("is a local address") && a.3.is_none()),
        "{audits:?}"
    );

    let exact = Proxy::start(&["*", "localhost"], &[], &[]).await;
    let mut c = tunnel(&exact, &format!("localhost:{port}"), b"").await;
    c.write_all(b"ping").await.unwrap();
    expect_echo(&mut c, b"ping").await;
    assert_eq!(exact.audits()[0].3, Some(up));
}

#[tokio::test]
async fn a_plain_request_goes_once_in_origin_form_without_hop_by_hop_headers() {
    let response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
    let (up, got) = http_upstream(response).await;
    let proxy = Proxy::start(&["127.0.0.1"], &[], &[]).await;
    let request = format!(
        "POST http://127.0.0.1:{}/up?x=1 HTTP/1.1\r\nHost: elsewhere.example\r\n\
         Proxy-Authorization: Basic Zm9v\r\nProxy-Connection: keep-alive\r\n\
         Connection: keep-alive, X-Private\r\nX-Private: 1\r\nKeep-Alive: 5\r\n\
         Content-Length: 5\r\nX-Kept: yes\r\n\r\nhello\
         DELETE http://127.0.0.1:{}/second HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        up.port(),
        up.port()
    );
    assert_eq!(proxy.exchange(request.as_bytes()).await, response);
    let sent = format!(
        "POST /up?x=1 HTTP/1.1\r\nHost: {up}\r\nContent-Length: 5\r\nX-Kept: yes\r\n\
         Connection: close\r\n\r\nhello"
    );
    assert_eq!(within(got).await.unwrap(), sent);
    let audits = proxy.audits();
    assert_eq!(
        audits,
        [(up.to_string(), Via::Http, "allowed".to_string(), Some(up))]
    );
}

#[tokio::test]
async fn the_response_flows_while_the_body_waits_for_100_continue() {
    const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listener.local_addr().unwrap();
    let upstream = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        while !got.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            s.read_exact(&mut byte).await.unwrap();
            got.push(byte[0]);
        }
        s.write_all(CONTINUE).await.unwrap();
        let mut body = [0u8; 4];
        s.read_exact(&mut body).await.unwrap();
        s.write_all(b"HTTP/1.1 201 Created\r\n\r\n").await.unwrap();
        body
    });
    let proxy = Proxy::start(&["127.0.0.1"], &[], &[]).await;
    let mut c = proxy.client().await;
    let head =
        format!("PUT http://{up}/f HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    c.write_all(head.as_bytes()).await.unwrap();
    let mut got = vec![0u8; CONTINUE.len()];
    within(c.read_exact(&mut got)).await.unwrap();
    assert_eq!(got, CONTINUE);
    c.write_all(b"data").await.unwrap();
    let mut rest = Vec::new();
    within(c.read_to_end(&mut rest)).await.unwrap();
    assert_eq!(rest, b"HTTP/1.1 201 Created\r\n\r\n");
    assert_eq!(&within(upstream).await.unwrap(), b"data");
}

#[tokio::test]
async fn a_read_only_host_takes_get_but_no_post_tunnel_or_socks() {
    let response = "HTTP/1.0 200 OK\r\n\r\nread";
    let (up, got) = http_upstream(response).await;
    let proxy = Proxy::start(&[], &[], &["127.0.0.1"]).await;
    let port = up.port();
    let get = format!("GET http://127.0.0.1:{port} HTTP/1.1\r\n\r\n");
    assert_eq!(proxy.exchange(get.as_bytes()).await, response);
    assert_eq!(
        within(got).await.unwrap(),
        format!("GET / HTTP/1.1\r\nHost: {up}\r\nConnection: close\r\n\r\n")
    );
    let post = format!("POST http://127.0.0.1:{port}/ HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
    let answer = proxy.exchange(post.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 403") && answer.contains("POST is not GET"),
        "{answer}"
    );
    let answer = proxy
        .exchange(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await;
    assert!(
        answer.starts_with("HTTP/1.1 403") && answer.contains("cannot be seen"),
        "{answer}"
    );
    let mut req = vec![5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1];
    req.extend_from_slice(&port.to_be_bytes());
    assert_eq!(
        proxy.exchange_bytes(&req).await,
        [5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0]
    );
    let outcomes: Vec<String> = proxy.audits().into_iter().map(|a| a.2).collect();
    assert_eq!(outcomes.len(), 4);
    assert_eq!(outcomes[0], "allowed");
    assert!(
        outcomes[1..].iter().all(|o| o.starts_with("denied: ")),
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn a_chunked_body_is_a_411() {
    let proxy = Proxy::start(&["*"], &[], &[]).await;
    let request = b"POST http://example.com/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let answer = proxy.exchange(request).await;
    assert!(
        answer.starts_with("HTTP/1.1 411 Length Required\r\n"),
        "{answer}"
    );
    assert!(answer.contains("must have a Content-Length"), "{answer}");
    let audits = proxy.audits();
    assert_eq!(audits.len(), 1);
    assert_eq!(audits[0].0, "example.com:80");
    assert!(audits[0].2.starts_with("denied: ") && audits[0].3.is_none());
}

#[tokio::test]
async fn hostile_heads_are_answered_and_name_no_destination() {
    let proxy = Proxy::start(&["*"], &[], &[]).await;
    let many = format!(
        "GET http://a.com/ HTTP/1.1\r\n{}\r\n",
        "A: b\r\n".repeat(101)
    );
    let huge = format!(
        "GET http://a.com/ HTTP/1.1\r\nA: {}\r\n\r\n",
        "x".repeat(17 * 1024)
    );
    let cases: Vec<(&[u8], &str)> = vec![
        (b"GET /path HTTP/1.1\r\nHost: a.com\r\n\r\n", "400"),
        (b"OPTIONS * HTTP/1.1\r\n\r\n", "400"),
        (b"GET https://a.com/ HTTP/1.1\r\n\r\n", "400"),
        (b"GET http://user@a.com/ HTTP/1.1\r\n\r\n", "400"),
        (b"GET http://127.1/ HTTP/1.1\r\n\r\n", "400"),
        (b"GET http://a.com/ HTTP/1.1\r\nno colon\r\n\r\n", "400"),
        (b"GET http://a.com/ HTTP/1.1\r\n folded: x\r\n\r\n", "400"),
        (b"GET http://a.com/ HTTP/1.1\r\nA: b\rc\r\n\r\n", "400"),
        (b"GET http://a.com/ HTTP/1.1\r\nA: \0\r\n\r\n", "400"),
        (b"GET http://a.com/ HTTP/1.1\r\nA: \xff\r\n\r\n", "400"),
        (
            b"GET http://a.com/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "400",
        ),
        (
            b"GET http://a.com/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "400",
        ),
        (b"GET http://a.com:0/ HTTP/1.1\r\n\r\n", "400"),
        (b"CONNECT a.com:0 HTTP/1.1\r\n\r\n", "400"),
        (b"CONNECT a.com:65536 HTTP/1.1\r\n\r\n", "400"),
        (b"CONNECT a.com HTTP/1.1\r\n\r\n", "400"),
        (b"CONNECT a.com:443 HTTP/2.0\r\n\r\n", "400"),
        (b"GARBAGE\r\n\r\n", "400"),
        (b"\r\n\r\n", "400"),
        (many.as_bytes(), "431"),
        (huge.as_bytes(), "431"),
    ];
    for (request, status) in cases {
        let answer = proxy.exchange(request).await;
        let shown = String::from_utf8_lossy(request);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{shown:?}: {answer}"
        );
        assert!(
            answer.contains("\r\n\r\ncuba-exec: "),
            "{shown:?}: {answer}"
        );
    }
    assert_eq!(proxy.audits(), []);
}

#[tokio::test]
async fn a_client_gone_or_too_slow_mid_head_is_dropped() {
    let limits = Limits {
        head: Duration::from_millis(300),
        ..LIMITS
    };
    let proxy = Proxy::with(&["*"], &[], &[], limits).await;
    let mut gone = proxy.client().await;
    gone.write_all(b"CONNECT a.com:443 HTTP/1.1\r\nHo")
        .await
        .unwrap();
    drop(gone);
    let mut socks_gone = proxy.client().await;
    socks_gone.write_all(&[5, 1, 0, 5, 1]).await.unwrap();
    drop(socks_gone);
    // Too slow: closed without an answer.
    assert_eq!(proxy.exchange(b"GET http://a.com/ HTTP/1.1\r\n").await, "");
    assert_eq!(proxy.exchange(&[5, 1]).await, "");
    assert_eq!(proxy.exchange(b"").await, "");
    // And the proxy still answers.
    assert!(proxy
        .exchange(b"GET / HTTP/1.1\r\n\r\n")
        .await
        .starts_with("HTTP/1.1 400 "));
    assert_eq!(proxy.audits(), []);
}
