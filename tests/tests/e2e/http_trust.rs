//! The HTTP endpoint's trust: TLS with a certificate read again when its files change, and
//! tokens of an external OAuth authorization server — a stand-in issuer on 127.0.0.1 serving
//! its JWKS — whose signature, issuer, audience and expiry are checked.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use cuba_tests::http::{exchange, HttpServer};
use cuba_tests::{bounded, TestDaemon, STEP};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is needed to make test certificates");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new P-256 key without a passphrase, for `openssl req`.
const NEW_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// A CA `ca-NAME.pem` and a certificate for 127.0.0.1 it signed, at `cert.pem` / `key.pem`.
fn make_certificate(dir: &Path, name: &str) {
    let ca_key = format!("ca-{name}.key");
    let ca = format!("ca-{name}.pem");
    let subject = format!("/CN=test CA {name}");
    let ca_args = [
        "-keyout", &ca_key, "-out", &ca, "-days", "2", "-subj", &subject,
    ];
    openssl(dir, &[&["req", "-x509"][..], &NEW_KEY, &ca_args].concat());
    let leaf_args = [
        "-keyout",
        "new-key.pem",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=127.0.0.1",
    ];
    openssl(dir, &[&["req"][..], &NEW_KEY, &leaf_args].concat());
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    let sign = [
        "x509", "-req", "-in", "leaf.csr", "-CA", &ca, "-CAkey", &ca_key,
    ];
    let out = [
        "-CAcreateserial",
        "-out",
        "new-cert.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ];
    openssl(dir, &[&sign[..], &out].concat());
    // Both files replaced by rename, as a renewal tool does.
    std::fs::rename(dir.join("new-key.pem"), dir.join("key.pem")).unwrap();
    std::fs::rename(dir.join("new-cert.pem"), dir.join("cert.pem")).unwrap();
}

/// A GET of the metadata document over TLS, trusting only CA `name`.
async fn tls_get(dir: &Path, addr: &str, name: &str) -> Result<cuba_tests::http::Reply, String> {
    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::from_pem_file(dir.join(format!("ca-{name}.pem"))).unwrap();
    roots.add(ca).unwrap();
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let server = ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector
        .connect(server, tcp)
        .await
        .map_err(|e| e.to_string())?;
    Ok(exchange(
        tls,
        addr,
        "GET",
        "/.well-known/oauth-protected-resource",
        &[],
        b"",
    )
    .await)
}

#[tokio::test]
async fn tls_serves_and_a_renewed_certificate_is_used_without_a_restart() {
    let d = TestDaemon::start().await;
    let certs = d.dir().join("certs");
    std::fs::create_dir(&certs).unwrap();
    make_certificate(&certs, "one");
    let http = format!(
        "tls_cert = \"{0}/cert.pem\"\ntls_key = \"{0}/key.pem\"",
        certs.display()
    );
    let s = HttpServer::start(&d, &http, "").await;
    let r = bounded("TLS GET", STEP, tls_get(&certs, &s.addr, "one"))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.contains(&format!("https://{}/mcp", s.addr)), "{r:?}");

    // Plain HTTP on the TLS port gets no reply.
    let mut plain = TcpStream::connect(&s.addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = bounded("plain on TLS", STEP, plain.read_to_end(&mut got)).await;
    assert!(
        !got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );

    make_certificate(&certs, "two");
    let renewed = bounded("TLS GET", STEP, tls_get(&certs, &s.addr, "two")).await;
    assert_eq!(renewed.map(|r| r.status), Ok(200));
    let old = bounded("TLS GET", STEP, tls_get(&certs, &s.addr, "one")).await;
    assert!(old.is_err(), "the old certificate is still served");
}

/// A stand-in authorization server: serves `jwks` at `/jwks` until dropped.
async fn issuer(jwks: String) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let body = jwks.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    (addr, task)
}

#[tokio::test]
async fn tokens_of_an_authorization_server_are_checked_with_its_keys() {
    let d = TestDaemon::start().await;
    let ec_key = |name: &str| {
        let pem = format!("{name}.pem");
        let der = format!("{name}.der");
        openssl(
            d.dir(),
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                &pem,
            ],
        );
        openssl(
            d.dir(),
            &[
                "pkcs8", "-topk8", "-nocrypt", "-in", &pem, "-outform", "DER", "-out", &der,
            ],
        );
        EncodingKey::from_ec_der(&std::fs::read(d.dir().join(der)).unwrap())
    };
    let key = ec_key("issuer");
    let forger = ec_key("forger");
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
    jwk.common.key_id = Some("k1".into());
    let jwks = serde_json::to_string(&JwkSet { keys: vec![jwk] }).unwrap();
    let (addr, _issuer) = issuer(jwks).await;

    let iss = "https://auth.example";
    let aud = "https://box.example/mcp";
    let http = format!(
        "url = \"{aud}\"\nallowed_hosts = [\"box.example\"]\n[http.jwt]\nissuer = \"{iss}\"\n\
         jwks = \"http://{addr}/jwks\"\nowner_claim = \"email\""
    );
    let s = HttpServer::start(&d, &http, "").await;
    let doc = s.get("/.well-known/oauth-protected-resource").await;
    let doc: serde_json::Value = serde_json::from_str(&doc.body).unwrap();
    assert_eq!(doc["resource"], aud);
    assert_eq!(doc["authorization_servers"], json!([iss]));

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let sign = |claims: serde_json::Value, key: &EncodingKey, kid: &str| {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, &claims, key).unwrap()
    };
    let claims = |iss: &str, aud: &str, exp: u64| json!({"iss": iss, "aud": aud, "exp": exp, "sub": "u1", "email": "ana@example.com"});
    let good = sign(claims(iss, aud, now + 600), &key, "k1");
    let session = s.session(&good).await;
    let ran = s
        .call(&good, &session, "run", json!({"command": "echo jwt-ok"}))
        .await;
    assert!(ran.text().contains("jwt-ok"), "{ran:?}");
    let list = s.call(&good, &session, "list_processes", json!({})).await;
    // Named `jwt:` and the subject: no token's name can be that (nor its processes' owner).
    assert!(
        list.text().contains("owner:jwt:ana@example.com"),
        "{list:?}"
    );

    // Not valid yet (`nbf` an hour ahead): refused; valid since a minute ago: served.
    let at = |nbf: u64| json!({"iss": iss, "aud": aud, "exp": now + 7200, "nbf": nbf, "email": "ana@example.com"});
    let early = s
        .rpc(&sign(at(now + 3600), &key, "k1"), None, "ping", json!({}))
        .await;
    assert_eq!(early.status, 401, "{early:?}");
    assert!(!s.session(&sign(at(now - 60), &key, "k1")).await.is_empty());

    // Subjects equal in their first 64 characters (and more) are two callers, two owners.
    let long = "a".repeat(70);
    let subject = |tail: &str| json!({"iss": iss, "aud": aud, "exp": now + 600, "email": format!("{long}{tail}")});
    let (one, two) = (
        sign(subject("1"), &key, "k1"),
        sign(subject("2"), &key, "k1"),
    );
    let first = s.session(&one).await;
    let stolen = s.call(&two, &first, "list_processes", json!({})).await;
    assert_eq!(stolen.status, 404, "{stolen:?}");
    let second = s.session(&two).await;
    s.call(&one, &first, "start", json!({"command": "sleep 31"}))
        .await;
    s.call(&two, &second, "start", json!({"command": "sleep 32"}))
        .await;
    let list = s
        .call(&one, &first, "list_processes", json!({}))
        .await
        .text();
    let owner = |command: &str| {
        list.lines()
            .find(|l| l.ends_with(command))
            .and_then(|l| l.split("owner:").nth(1))
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or_else(|| panic!("{command}: {list}"))
            .to_string()
    };
    let (owner_one, owner_two) = (owner("$ sleep 31"), owner("$ sleep 32"));
    assert_ne!(owner_one, owner_two, "{list}");
    assert!(owner_one.starts_with("jwt:aaaa"), "{list}");

    let refused = [
        (
            "another audience",
            sign(
                claims(iss, "https://other.example/mcp", now + 600),
                &key,
                "k1",
            ),
        ),
        (
            "another issuer",
            sign(claims("https://evil.example", aud, now + 600), &key, "k1"),
        ),
        ("expired", sign(claims(iss, aud, now - 600), &key, "k1")),
        (
            "a key the issuer does not have",
            sign(claims(iss, aud, now + 600), &forger, "k1"),
        ),
        (
            "an unknown key id",
            sign(claims(iss, aud, now + 600), &forger, "k9"),
        ),
        ("not a JWT", "eyJhbGciOi.not.a-token".to_string()),
    ];
    for (what, token) in refused {
        let r = s.rpc(&token, None, "ping", json!({})).await;
        assert_eq!(r.status, 401, "{what}: {r:?}");
        let challenge = r.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
    }
    // The server's own tokens work beside the issuer's.
    let own = s.token(&["create", "local"]).await;
    assert!(!s.session(&own).await.is_empty());

    // A JWT within a few seconds of its end (exp plus the 60 s leeway): what its subject has
    // open ends then, without a request.
    let lapsing = sign(
        json!({"iss": iss, "aud": aud, "exp": now - 56, "email": "lapsing@example.com"}),
        &key,
        "k1",
    );
    let session = s.session(&lapsing).await;
    let mut stream = s.stream(&lapsing, &session).await.unwrap();
    let mut rest = Vec::new();
    let mut buf = [0u8; 1024];
    bounded("the stream to end with its JWT", STEP, async {
        while !rest.ends_with(b"0\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => rest.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let later = s
        .call(&lapsing, &session, "list_processes", json!({}))
        .await;
    assert_eq!(later.status, 401, "{later:?}");
}
