//! Who a request comes from: a bearer token the daemon made (its SHA-256 asked of the daemon
//! for every request, so a revoked or expired token fails on its next one, and a token written
//! into `tokens.toml` by anything but the daemon is not one) or, when `[http.jwt]` is set, a
//! JWT of that issuer, signature, `iss`, `aud`, `exp` and `nbf` checked. A JWT's caller is
//! named `jwt:` and its subject, which no token's name can be.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cuba_protocol::tokens::{self, Refused};
use cuba_protocol::{ClientInfo, ClientKind, TokenInfo, TokenVerdict};

use super::jwt::Issuer;
use super::settings::{Scope, Settings};
use crate::link::Link;

/// One caller: a token (or a JWT subject), the owner of what it starts, with its own
/// connections to the daemon and its hosts.
pub struct Caller {
    /// What its sessions are bound to: a session made with one token is not another's.
    pub key: Arc<str>,
    pub name: String,
    pub link: Link,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller").field("name", &self.name).finish()
    }
}

/// Callers kept at most: more start the cache again.
const MAX_CALLERS: usize = 4096;

/// Callers by key, each with what the daemon said of its token when it was made (a token
/// whose scope changed gets a new caller); a JWT subject's has none.
type Callers = HashMap<String, (Option<TokenInfo>, Arc<Caller>)>;

/// Token checks asked of the daemon at once: they share the endpoint's one connection, which
/// the daemon bounds (256 requests in flight); the rest wait their turn.
const CHECKS_AT_ONCE: usize = 64;

/// A JWT caller's name is at most this long (subject included), before its hash is added.
const JWT_NAME: usize = 64;

pub struct Auth {
    callers: Mutex<Callers>,
    checks: tokio::sync::Semaphore,
    issuer: Option<Issuer>,
    /// The connections every caller's links are made from, and the daemon's, which keeps the
    /// tokens.
    base: Arc<Link>,
}

impl Auth {
    pub fn new(settings: &Settings, base: Arc<Link>) -> Result<Auth, String> {
        let issuer = settings
            .jwt
            .as_ref()
            .map(|j| Issuer::new(j, settings.url.as_deref()))
            .transpose()?;
        Ok(Auth {
            callers: Mutex::new(HashMap::new()),
            checks: tokio::sync::Semaphore::new(CHECKS_AT_ONCE),
            issuer,
            base,
        })
    }

    pub fn issuer(&self) -> Option<&str> {
        self.issuer.as_ref().map(Issuer::name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Callers> {
        self.callers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The caller `authorization` (the header's value) names, with when its JWT ends (seconds
    /// since the epoch; `None` for a token), or why it is refused.
    pub async fn check(
        &self,
        authorization: Option<&[u8]>,
    ) -> Result<(Arc<Caller>, Option<u64>), Refused> {
        let token = authorization
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(bearer)
            .ok_or(Refused::Missing)?;
        // Our own tokens by their prefix; anything else is the issuer's, if there is one.
        let issuer = match &self.issuer {
            Some(i) if !token.starts_with(tokens::PREFIX) => i,
            _ => return self.check_token(token).await.map(|c| (c, None)),
        };
        let (subject, scope, ends) = issuer.check(token).await?;
        // The whole subject, hashed: subjects are told apart however long they are.
        let key = format!("{JWT_PREFIX}{}", tokens::hash(&subject));
        let mut callers = self.lock();
        if let Some((_, c)) = callers.get(&key) {
            return Ok((c.clone(), Some(ends)));
        }
        let caller = self.caller(key.clone(), jwt_name(&subject), &scope);
        remember(&mut callers, key, None, caller.clone());
        Ok((caller, Some(ends)))
    }

    /// Whether the token whose hash is `key` is still valid (`None`: the daemon cannot say).
    pub async fn still_valid(&self, key: &str) -> Option<bool> {
        match self.ask(key.to_string()).await {
            Ok(TokenVerdict::Valid(_)) => Some(true),
            Ok(TokenVerdict::Unknown | TokenVerdict::Expired) => Some(false),
            Err(_) => None,
        }
    }

    async fn ask(&self, hash: String) -> Result<TokenVerdict, cuba_protocol::client::ClientError> {
        // Never closed: a failed acquire would only mean no bound.
        let _turn = self.checks.acquire().await;
        self.base
            .daemon(|c| {
                let hash = hash.clone();
                async move { c.token_check(hash).await }
            })
            .await
    }

    async fn check_token(&self, token: &str) -> Result<Arc<Caller>, Refused> {
        let hash = tokens::hash(token);
        let asked = self.ask(hash.clone()).await;
        let info = match asked {
            Ok(TokenVerdict::Valid(info)) => info,
            Ok(TokenVerdict::Unknown) => return Err(Refused::Unknown),
            Ok(TokenVerdict::Expired) => return Err(Refused::Expired),
            Err(e) => {
                tracing::warn!("cannot ask the daemon about a token: {e}");
                return Err(Refused::Unavailable);
            }
        };
        let mut callers = self.lock();
        if let Some((Some(known), c)) = callers.get(&hash) {
            if *known == info {
                return Ok(c.clone());
            }
        }
        let scope = Scope {
            hosts: info.hosts.clone(),
            allow: info.allow.clone(),
            roots: info.roots.clone(),
        };
        let caller = self.caller(hash.clone(), info.name.clone(), &scope);
        remember(&mut callers, hash, Some(info), caller.clone());
        Ok(caller)
    }

    /// A caller named `name` with `scope`: the daemon sees a client of that name whose
    /// narrowing is the scope, working in its first root (else the daemon user's home) — on
    /// this machine and on every host, where the roots narrow too (else a host's own `cwd`).
    fn caller(&self, key: String, name: String, scope: &Scope) -> Arc<Caller> {
        let mut env = Vec::new();
        if let Some(allow) = &scope.allow {
            env.push(("CUBA_EXEC_ALLOWED_COMMANDS".into(), allow.join(",").into()));
        }
        if let Some(roots) = &scope.roots {
            env.push(("CUBA_EXEC_ALLOWED_DIRS".into(), roots.join(",").into()));
            // Roots confine writes too: its commands run in the sandbox, which lets them write
            // only there (and in temp). Where no sandbox can be had, they are refused, not run
            // unconfined.
            env.push(("CUBA_EXEC_SANDBOX".into(), "workspace-write".into()));
        }
        let cwd = scope
            .roots
            .as_ref()
            .and_then(|r| r.first())
            .map(Into::into)
            .unwrap_or_default();
        let who = ClientInfo {
            kind: ClientKind::Mcp,
            name: name.clone(),
            pid: std::process::id(),
            cwd,
            env,
        };
        let mut hosts = self.base.hosts().clone();
        if let Some(h) = &scope.hosts {
            hosts.narrow(h);
        }
        if let Some(root) = scope.roots.as_ref().and_then(|r| r.first()) {
            // A host's `cwd` (or the remote home) is outside the roots the host is told of.
            let specs: Vec<_> = hosts.all().cloned().collect();
            for mut spec in specs {
                spec.cwd = Some(root.clone());
                hosts.insert(spec);
            }
        }
        Arc::new(Caller {
            key: key.into(),
            name,
            link: self.base.for_caller(hosts, who),
        })
    }
}

/// What a JWT caller's key begins with: no token's hash does.
pub const JWT_PREFIX: &str = "jwt:";

/// The name a JWT subject's processes are owned by: `jwt:` and the subject, which no token's
/// name can equal (a token's has no `:`). A subject too long, or with characters a token name
/// could not have, is cut and marked, and its hash added, so two subjects are never one owner.
fn jwt_name(subject: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.@".contains(c);
    let room = JWT_NAME - JWT_PREFIX.len();
    if subject.len() <= room && subject.chars().all(plain) {
        return format!("{JWT_PREFIX}{subject}");
    }
    let kept: String = subject
        .chars()
        .take(room - 17)
        .map(|c| if plain(c) { c } else { '_' })
        .collect();
    format!("{JWT_PREFIX}{kept}~{}", &tokens::hash(subject)[..16])
}

fn remember(callers: &mut Callers, key: String, info: Option<TokenInfo>, caller: Arc<Caller>) {
    if callers.len() >= MAX_CALLERS {
        callers.clear();
    }
    callers.insert(key, (info, caller));
}

/// `Bearer <token>` (the scheme in any case, RFC 6750).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_is_read_in_any_case() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn jwt_subjects_are_distinct_owners_no_token_can_be() {
        assert_eq!(jwt_name("alice@example.com"), "jwt:alice@example.com");
        let long = "a".repeat(64);
        let (one, two) = (format!("{long}1"), format!("{long}2"));
        assert_ne!(jwt_name(&one), jwt_name(&two));
        assert!(jwt_name(&one).len() <= JWT_NAME, "{}", jwt_name(&one));
        assert_ne!(jwt_name("a b"), jwt_name("a_b"));
        assert!(tokens::check_name(&jwt_name("laptop")).is_err());
    }
}
