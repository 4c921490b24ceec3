//! Who a request comes from: a bearer token of `tokens.toml` (its SHA-256 looked up; the file
//! read again when it changes, so a revoked or new token takes effect at once) or, when
//! `[http.jwt]` is set, a JWT of that issuer, signature, `iss`, `aud` and `exp` checked.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use cuba_protocol::tokens::{self, Entry, Refused, Tokens};
use cuba_protocol::{ClientInfo, ClientKind};

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

/// Callers kept at most (JWT subjects are not bounded by the file): more start the cache again.
const MAX_CALLERS: usize = 4096;

pub struct Auth {
    path: PathBuf,
    file: Mutex<Loaded>,
    issuer: Option<Issuer>,
    /// The connections every caller's links are made from.
    base: Arc<Link>,
}

#[derive(Default)]
struct Loaded {
    /// What the file looked like when read: length, modification time, inode.
    stamp: Option<(u64, SystemTime, u64)>,
    by_hash: HashMap<String, (String, Entry)>,
    callers: HashMap<String, Arc<Caller>>,
    error: Option<String>,
}

impl Auth {
    pub fn new(settings: &Settings, base: Arc<Link>) -> Result<Auth, String> {
        let lookup = |k: &str| std::env::var(k).ok();
        let issuer = settings
            .jwt
            .as_ref()
            .map(|j| Issuer::new(j, settings.url.as_deref()))
            .transpose()?;
        let auth = Auth {
            path: tokens::file(&lookup),
            file: Mutex::new(Loaded::default()),
            issuer,
            base,
        };
        let mut loaded = auth.lock();
        auth.refresh(&mut loaded);
        if let Some(e) = &loaded.error {
            return Err(e.clone());
        }
        drop(loaded);
        Ok(auth)
    }

    pub fn tokens_file(&self) -> &std::path::Path {
        &self.path
    }

    pub fn issuer(&self) -> Option<&str> {
        self.issuer.as_ref().map(Issuer::name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the file again if it changed since the last look (a stat per request).
    fn refresh(&self, loaded: &mut Loaded) {
        let stamp = stamp(&self.path);
        if stamp == loaded.stamp && loaded.stamp.is_some() {
            return;
        }
        match Tokens::load(&self.path) {
            Ok(t) => {
                loaded.by_hash = t
                    .tokens
                    .into_iter()
                    .map(|(name, e)| (e.hash.clone(), (name, e)))
                    .collect();
                loaded.error = None;
            }
            Err(e) => {
                // A file that cannot be read admits nobody: not the old tokens, one of which
                // may have just been revoked.
                tracing::warn!("{e}");
                loaded.by_hash.clear();
                loaded.error = Some(e);
            }
        }
        loaded.stamp = stamp;
        // A token's scope may have changed: its caller is made again on its next request.
        loaded.callers.clear();
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
            _ => return self.check_token(token),
        };
        let (subject, scope) = issuer.check(token).await?;
        let key = format!("jwt:{subject}");
        let mut loaded = self.lock();
        if let Some(c) = loaded.callers.get(&key) {
            return Ok(c.clone());
        }
        let caller = self.caller(key.clone(), subject, &scope);
        remember(&mut loaded, key, caller.clone());
        Ok(caller)
    }

    fn check_token(&self, token: &str) -> Result<Arc<Caller>, Refused> {
        let hash = tokens::hash(token);
        let mut loaded = self.lock();
        self.refresh(&mut loaded);
        let (name, entry) = loaded.by_hash.get(&hash).ok_or(Refused::Unknown)?;
        tokens::usable(entry, now())?;
        if let Some(c) = loaded.callers.get(&hash) {
            return Ok(c.clone());
        }
        let scope = Scope {
            hosts: entry.hosts.clone(),
            allow: entry.allow.clone(),
            roots: entry.roots.clone(),
        };
        let caller = self.caller(hash.clone(), name.clone(), &scope);
        remember(&mut loaded, hash, caller.clone());
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

fn remember(loaded: &mut Loaded, key: String, caller: Arc<Caller>) {
    if loaded.callers.len() >= MAX_CALLERS {
        loaded.callers.clear();
    }
    loaded.callers.insert(key, caller);
}

/// `Bearer <token>` (the scheme in any case, RFC 6750).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn stamp(path: &std::path::Path) -> Option<(u64, SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.len(), meta.modified().ok()?, inode))
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
