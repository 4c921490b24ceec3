//! The HTTP endpoint's bearer tokens, kept by the daemon: minted here (`TokenCreate`, a
//! person's verb), checked here for every HTTP request (`TokenCheck`), revoked here.
//! `tokens.toml` keeps only each token's SHA-256; it is read when the daemon starts and when a
//! person confirms a hand edit (`Reload`), never because it changed: a command that can write
//! the file must not be able to mint itself a token.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cuba_protocol::tokens::{self, Entry, Tokens};
use cuba_protocol::{ProtocolError, TokenCreate, TokenInfo, TokenList, TokenMade, TokenVerdict};

use crate::state::person_file::Seen;

pub struct Bearer {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    tokens: Tokens,
    seen: Seen,
}

fn info(name: &str, e: &Entry) -> TokenInfo {
    TokenInfo {
        name: name.to_string(),
        created: e.created,
        expires: e.expires,
        hosts: e.hosts.clone(),
        allow: e.allow.clone(),
        roots: e.roots.clone(),
        budget: e.budget,
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Bearer {
    /// The tokens of `path`, read now.
    pub fn new(path: PathBuf) -> Bearer {
        let bearer = Bearer {
            path,
            state: Mutex::new(State::default()),
        };
        for line in bearer.reload() {
            if line.contains("does not read") {
                tracing::warn!("{line}");
            }
        }
        bearer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the token whose SHA-256 is `hash` may do, or why it may not.
    pub fn check(&self, hash: &str) -> TokenVerdict {
        let state = self.lock();
        match state.tokens.find(hash) {
            None => TokenVerdict::Unknown,
            Some((name, e)) => match tokens::usable(e, now()) {
                Ok(()) => TokenVerdict::Valid(info(name, e)),
                Err(_) => TokenVerdict::Expired,
            },
        }
    }

    /// The budget of the token named `name`, if it has one: what its agent may use.
    pub fn budget_of(&self, name: &str) -> Option<cuba_protocol::Budget> {
        self.lock().tokens.tokens.get(name).and_then(|e| e.budget)
    }

    /// Makes a token: shown this once, only its hash kept.
    pub fn create(&self, r: TokenCreate) -> Result<TokenMade, ProtocolError> {
        tokens::check_name(&r.name).map_err(ProtocolError::bad_request)?;
        if let Some(roots) = &r.roots {
            if let Some(bad) = roots.iter().find(|d| !Path::new(d).is_absolute()) {
                return Err(ProtocolError::bad_request(format!(
                    "root {bad:?} is not an absolute directory"
                )));
            }
        }
        let mut state = self.lock();
        let exists = state.tokens.tokens.contains_key(&r.name);
        if exists && !r.replace {
            return Err(ProtocolError::invalid_state(format!(
                "a token named {:?} exists; `cubactl token revoke {0}` first, or --replace",
                r.name
            )));
        }
        if !exists && state.tokens.tokens.len() >= tokens::MAX_TOKENS {
            return Err(ProtocolError::new(
                cuba_protocol::ErrorKind::Limit,
                format!(
                    "{} tokens exist, the most kept; revoke some",
                    tokens::MAX_TOKENS
                ),
            ));
        }
        let token = tokens::generate()
            .map_err(|e| ProtocolError::new(cuba_protocol::ErrorKind::Internal, e.to_string()))?;
        let created = now();
        let entry = Entry {
            hash: tokens::hash(&token),
            created,
            expires: r.expires_in.map(|s| created.saturating_add(s)),
            hosts: r.hosts,
            allow: r.allow,
            roots: r.roots,
            budget: r.budget.filter(|b| !b.is_empty()),
        };
        let made = TokenMade {
            token,
            info: info(&r.name, &entry),
            file: self.path.display().to_string(),
        };
        let mut next = state.tokens.clone();
        next.tokens.insert(r.name, entry);
        self.save(&mut state, next)?;
        Ok(made)
    }

    /// Revokes the token called `name`: its next request is refused.
    pub fn revoke(&self, name: &str) -> Result<(), ProtocolError> {
        let mut state = self.lock();
        let mut next = state.tokens.clone();
        if next.tokens.remove(name).is_none() {
            return Err(ProtocolError::new(
                cuba_protocol::ErrorKind::NotFound,
                format!("no token named {name:?} (`cubactl token list`)"),
            ));
        }
        self.save(&mut state, next)
    }

    pub fn list(&self) -> TokenList {
        let tokens = {
            let state = self.lock();
            state
                .tokens
                .tokens
                .iter()
                .map(|(n, e)| info(n, e))
                .collect()
        };
        TokenList {
            tokens,
            file: self.path.display().to_string(),
            unconfirmed: self.unconfirmed(),
        }
    }

    /// How the file differs from the tokens in effect, when something other than the daemon
    /// changed it.
    pub fn unconfirmed(&self) -> Vec<String> {
        let state = self.lock();
        if !state.seen.changed(&self.path) {
            return Vec::new();
        }
        let name = self.path.display().to_string();
        match Tokens::load(&self.path) {
            Ok(now) => diff(&name, &state.tokens, &now),
            Err(e) => vec![format!("{name} does not read: {e}")],
        }
    }

    /// Reads the file again and puts it in effect (a person confirmed it); what changed. A
    /// file that does not read admits nobody.
    pub fn reload(&self) -> Vec<String> {
        let mut state = self.lock();
        let seen = Seen::now(&self.path);
        let name = self.path.display().to_string();
        let (now, mut lines) = match Tokens::load(&self.path) {
            Ok(t) => (t, Vec::new()),
            Err(e) => (
                Tokens::default(),
                vec![format!("{name} does not read: {e}")],
            ),
        };
        lines.extend(diff(&name, &state.tokens, &now));
        state.tokens = now;
        state.seen = seen;
        lines
    }

    fn save(&self, state: &mut State, next: Tokens) -> Result<(), ProtocolError> {
        if state.seen.changed(&self.path) && self.path.exists() {
            // An edit by hand not confirmed is kept aside, not lost.
            let kept = self.path.with_extension("toml.edited");
            if std::fs::rename(&self.path, &kept).is_ok() {
                tracing::warn!(
                    file = %self.path.display(),
                    kept = %kept.display(),
                    "tokens file edited by hand and not reloaded; the edit is kept aside"
                );
            }
        }
        next.save(&self.path)
            .map_err(|e| ProtocolError::new(cuba_protocol::ErrorKind::Internal, e))?;
        state.tokens = next;
        state.seen = Seen::now(&self.path);
        Ok(())
    }
}

/// Tokens added, removed or changed from `was` to `now`, by name.
fn diff(file: &str, was: &Tokens, now: &Tokens) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, e) in &now.tokens {
        match was.tokens.get(name) {
            None => lines.push(format!("{file}: + token {name}")),
            Some(old) if old != e => lines.push(format!("{file}: ~ token {name} (changed)")),
            Some(_) => {}
        }
    }
    for name in was.tokens.keys() {
        if !now.tokens.contains_key(name) {
            lines.push(format!("{file}: - token {name}"));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn request(name: &str) -> TokenCreate {
        TokenCreate {
            name: name.into(),
            hosts: None,
            allow: Some(vec!["echo".into()]),
            roots: None,
            expires_in: None,
            replace: false,
            budget: None,
        }
    }

    #[test]
    fn minted_checked_revoked_and_a_hand_edit_waits_for_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        let b = Bearer::new(path.clone());
        let made = b.create(request("phone")).unwrap();
        let hash = tokens::hash(&made.token);
        assert!(matches!(b.check(&hash), TokenVerdict::Valid(i) if i.name == "phone"));
        assert!(b.create(request("phone")).is_err(), "exists");
        assert!(b.create(request("a b")).is_err(), "bad name");
        assert_eq!(b.check(&tokens::hash("cubatok_x")), TokenVerdict::Unknown);
        // A token written into the file by hand is not in effect until a reload.
        let forged = tokens::generate().unwrap();
        let mut file = Tokens::load(&path).unwrap();
        let mut entry = file.tokens["phone"].clone();
        entry.hash = tokens::hash(&forged);
        file.tokens.insert("forged".into(), entry);
        file.save(&path).unwrap();
        assert_eq!(b.check(&tokens::hash(&forged)), TokenVerdict::Unknown);
        assert_eq!(b.list().unconfirmed.len(), 1);
        let lines = b.reload();
        assert!(lines[0].ends_with("+ token forged"), "{lines:?}");
        assert!(matches!(
            b.check(&tokens::hash(&forged)),
            TokenVerdict::Valid(_)
        ));
        b.revoke("phone").unwrap();
        assert_eq!(b.check(&hash), TokenVerdict::Unknown);
        assert!(b.revoke("phone").is_err());
        let mut expired = request("old");
        expired.expires_in = Some(0);
        let old = b.create(expired).unwrap();
        assert_eq!(b.check(&tokens::hash(&old.token)), TokenVerdict::Expired);
    }
}
