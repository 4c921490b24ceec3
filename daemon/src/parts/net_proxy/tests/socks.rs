//! SOCKS5.
#![allow(clippy::unwrap_used)]

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A SOCKS5 CONNECT request for `addr` (ATYP and address bytes) and `port`.
fn socks_request(command: u8, addr: &[u8], port: u16) -> Vec<u8> {
    let mut req = vec![5, 1, 0, 5, command, 0];
    req.extend_from_slice(addr);
    req.extend_from_slice(&port.to_be_bytes());
    req
}

fn domain(name: &str) -> Vec<u8> {
    let mut out = vec![3, u8::try_from(name.len()).unwrap()];
    out.extend_from_slice(name.as_bytes());
    out
}

#[tokio::test]
async fn socks5_connects_by_name_or_address_and_names_the_bound_address() {
    let up = echo().await;
    let proxy = Proxy::start(&["localhost", "127.0.0.1"], &[], &[]).await;
    for addr in [domain("LOCALHOST"), vec![1, 127, 0, 0, 1]] {
        let mut c = proxy.client().await;
        // Greeting and request at once, then data: what follows the request is relayed.
        let mut req = socks_request(1, &addr, up.port());
        req.extend_from_slice(b"hello");
        c.write_all(&req).await.unwrap();
        let mut answer = [0u8; 12];
        within(c.read_exact(&mut answer)).await.unwrap();
        assert_eq!(answer[..7], [5, 0, 5, 0, 0, 1, 127]);
        assert_ne!(u16::from_be_bytes([answer[10], answer[11]]), 0);
        expect_echo(&mut c, b"hello").await;
    }
    let audits = proxy.audits();
    let hosts: Vec<&str> = audits.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(hosts, [format!("localhost:{}", up.port()), up.to_string()]);
    assert!(audits
        .iter()
        .all(|a| a.1 == Via::Socks5 && a.2 == "allowed" && a.3 == Some(up)));
}

#[tokio::test]
async fn socks5_refusals_have_their_reply_codes() {
    let proxy = Proxy::start(&["127.0.0.1", "nothing.invalid"], &["::1", "bad.com"], &[]).await;
    let port = closed_port().await;
    let v6 = [vec![4], std::net::Ipv6Addr::LOCALHOST.octets().to_vec()].concat();
    let ip = [1, 1, 2, 3, 4];
    let no_method = vec![5, 0xFF];
    // After the greeting's answer (5 0), the reply: 5 CODE 0, then 0.0.0.0:0.
    let code = |c: u8| vec![5, 0, 5, c, 0, 1, 0, 0, 0, 0, 0, 0];
    let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (vec![5, 1, 2], no_method.clone()),
        (vec![5, 0], no_method),
        (socks_request(2, &ip, 80), code(7)),
        (socks_request(3, &ip, 80), code(7)),
        (socks_request(1, &[9, 1, 2, 3, 4], 80), code(8)),
        (socks_request(1, &domain("a b"), 80), code(1)),
        (socks_request(1, &ip, 0), code(1)),
        (socks_request(1, &v6, 443), code(2)),
        (socks_request(1, &domain("bad.com"), 443), code(2)),
        (socks_request(1, &domain("nothing.invalid"), 443), code(4)),
        (socks_request(1, &[1, 127, 0, 0, 1], port), code(5)),
    ];
    for (request, want) in cases {
        assert_eq!(proxy.exchange_bytes(&request).await, want, "{request:?}");
    }
    let audits = proxy.audits();
    let hosts: Vec<&str> = audits.iter().map(|a| a.0.as_str()).collect();
    let closed = format!("127.0.0.1:{port}");
    assert_eq!(
        hosts,
        ["[::1]:443", "bad.com:443", "nothing.invalid:443", &closed]
    );
    let outcomes: Vec<&str> = audits.iter().map(|a| &a.2[..7]).collect();
    assert_eq!(outcomes, ["denied:", "denied:", "failed:", "failed:"]);
}
