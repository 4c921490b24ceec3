//! Tokens of an external OAuth authorization server (`[http.jwt]`): a JWT signed with one of
//! the issuer's public keys (its JWKS, a file or an `http://` URL), with `iss`, `aud` (RFC 8707:
//! this resource), `exp` and `nbf` checked. A key id the set lacks makes it read again, at most
//! once a minute, so the issuer's key rotation needs no restart.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cuba_protocol::tokens::Refused;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

use super::settings::{Jwt, Scope};

/// The longest JWKS document read.
const MAX_JWKS: usize = 1 << 20;
/// How long a JWKS fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Fetches for an unknown key id at most this often: a client sending made-up key ids must not
/// make the server hammer the issuer.
const REFETCH: Duration = Duration::from_secs(60);

enum Source {
    File(PathBuf),
    Url { host: String, path: String },
}

pub struct Issuer {
    name: String,
    audience: String,
    owner_claim: String,
    source: Source,
    scope: Scope,
    keys: Mutex<(JwkSet, Option<Instant>)>,
}

impl Issuer {
    pub fn new(jwt: &Jwt, url: Option<&str>) -> Result<Issuer, String> {
        let audience = jwt
            .audience
            .clone()
            .or_else(|| url.map(str::to_string))
            .ok_or("[http.jwt] needs `audience`, or [http] `url` to be the audience")?;
        let source = match jwt.jwks.strip_prefix("http://") {
            Some(rest) => {
                let (host, path) = match rest.find('/') {
                    Some(i) => (&rest[..i], &rest[i..]),
                    None => (rest, "/"),
                };
                Source::Url {
                    host: host.to_string(),
                    path: path.to_string(),
                }
            }
            None if jwt.jwks.starts_with("https://") => {
                return Err(format!(
                    "[http.jwt] jwks = {:?}: https URLs are not fetched; save the issuer's JWKS \
                     to a file (refreshed as the issuer rotates keys) and name that file",
                    jwt.jwks
                ))
            }
            None => Source::File(PathBuf::from(&jwt.jwks)),
        };
        Ok(Issuer {
            name: jwt.issuer.clone(),
            audience,
            owner_claim: jwt.owner_claim.clone(),
            source,
            scope: Scope {
                hosts: jwt.hosts.clone(),
                allow: jwt.allow.clone(),
                roots: jwt.roots.clone(),
            },
            keys: Mutex::new((JwkSet { keys: Vec::new() }, None)),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The caller's subject (the owner claim, whole), its scope and the token's `exp`, or why
    /// the token is refused.
    pub async fn check(&self, token: &str) -> Result<(String, Scope, u64), Refused> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refused::Unknown)?;
        // The issuer's keys are public: a shared-secret algorithm would let anyone who has
        // the JWKS sign tokens.
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(Refused::Unknown);
        }
        let key = self
            .key(header.kid.as_deref())
            .await
            .ok_or(Refused::Unknown)?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.name]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        // A token not valid yet is refused, with the leeway `exp` has.
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &key, &validation).map_err(
            |e| match e.kind() {
                ErrorKind::ExpiredSignature => Refused::Expired,
                _ => Refused::Unknown,
            },
        )?;
        let owner = data
            .claims
            .get(&self.owner_claim)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .ok_or(Refused::Unknown)?;
        let exp = data
            .claims
            .get("exp")
            .and_then(|v| v.as_f64())
            .ok_or(Refused::Unknown)?;
        // The first second the check refuses it (past `exp` by more than the leeway): what
        // the caller holds ends then.
        let ends = (exp.max(0.0) as u64)
            .saturating_add(validation.leeway)
            .saturating_add(1);
        Ok((owner.to_string(), self.scope.clone(), ends))
    }

    /// The key `kid` names (or the only key, when the token names none).
    async fn key(&self, kid: Option<&str>) -> Option<DecodingKey> {
        let mut keys = self.keys.lock().await;
        let stale = keys.1.is_none_or(|t| t.elapsed() >= REFETCH);
        if find(&keys.0, kid).is_none() && stale {
            match self.fetch().await {
                Ok(set) => *keys = (set, Some(Instant::now())),
                Err(e) => {
                    tracing::warn!("cannot read the issuer's keys: {e}");
                    keys.1 = Some(Instant::now());
                }
            }
        }
        let jwk = find(&keys.0, kid)?;
        DecodingKey::from_jwk(jwk).ok()
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let text = match &self.source {
            Source::File(p) => std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?,
            Source::Url { host, path } => tokio::time::timeout(FETCH_TIMEOUT, get(host, path))
                .await
                .map_err(|_| format!("http://{host}{path}: no answer in time"))??,
        };
        serde_json::from_slice(&text).map_err(|e| format!("the JWKS is not valid: {e}"))
    }
}

fn find<'a>(set: &'a JwkSet, kid: Option<&str>) -> Option<&'a jsonwebtoken::jwk::Jwk> {
    match kid {
        Some(k) => set.find(k),
        None if set.keys.len() == 1 => set.keys.first(),
        None => None,
    }
}

/// A plain `GET` (HTTP/1.0: the server closes, the body is the rest), bounded.
async fn get(host: &str, path: &str) -> Result<Vec<u8>, String> {
    let url = format!("http://{host}{path}");
    let addr = match host.contains(':') {
        true => host.to_string(),
        false => format!("{host}:80"),
    };
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let request =
        format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: application/json\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let mut reply = Vec::new();
    (&mut stream)
        .take(MAX_JWKS as u64 + 8192)
        .read_to_end(&mut reply)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let split = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("{url}: not an HTTP reply"))?;
    let status = reply.split(|b| *b == b' ').nth(1).unwrap_or_default();
    if status != b"200" {
        return Err(format!("{url}: status {}", String::from_utf8_lossy(status)));
    }
    Ok(reply.split_off(split + 4))
}
