//! Who a request comes from: a bearer token the daemon made (its SHA-256 asked of the daemon
//! for every request, so a revoked or expired token fails on its next one, and a token written
//! into `tokens.toml` by anything but the daemon is not one) or, when `[http.jwt]` is set, a
//! JWT of that issuer, signature, `iss`, `aud` and `exp` checked.

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

pub struct Auth {
    callers: Mutex<Callers>,
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

    /// The caller `authorization` (the header's value) names, or why it is refused.
    pub async fn check(&self, authorization: Option<&[u8]>) -> Result<Arc<Caller>, Refused> {
        let token = authorization
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(bearer)
            .ok_or(Refused::Missing)?;
        // Our own tokens by their prefix; anything else is the issuer's, if there is one.
        let issuer = match &self.issuer {
            Some(i) if !token.starts_with(tokens::PREFIX) => i,
            _ => return self.check_token(token).await,
        };
        let (subject, scope) = issuer.check(token).await?;
        let key = format!("jwt:{subject}");
        let mut callers = self.lock();
        if let Some((_, c)) = callers.get(&key) {
            return Ok(c.clone());
        }
        let caller = self.caller(key.clone(), subject, &scope);
        remember(&mut callers, key, None, caller.clone());
        Ok(caller)
    }

    async fn check_token(&self, token: &str) -> Result<Arc<Caller>, Refused> {
        let hash = tokens::hash(token);
        let asked = self
            .base
            .daemon(|c| {
                let hash = hash.clone();
                async move { c.token_check(hash).await }
            })
            .await;
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
    /// narrowing is the scope, working in its first root (else the daemon user's home).
    fn caller(&self, key: String, name: String, scope: &Scope) -> Arc<Caller> {
        let mut env = Vec::new();
        if let Some(allow) = &scope.allow {
            env.push(("CUBA_EXEC_ALLOWED_COMMANDS".into(), allow.join(",").into()));
        }
        if let Some(roots) = &scope.roots {
            env.push(("CUBA_EXEC_ALLOWED_DIRS".into(), roots.join(",").into()));
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
        Arc::new(Caller {
            key: key.into(),
            name,
            link: self.base.for_caller(hosts, who),
        })
    }
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
}
