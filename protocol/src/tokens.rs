//! Bearer tokens for the HTTP endpoint (`cubactl token create|list|revoke`, made and checked by
//! the daemon for `cuba-exec serve --http`). A token is printed once; `tokens.toml` keeps only
//! its SHA-256, its name and its scope: the hosts it may reach, the commands it may run, the
//! directories it may work in, and when it stops working.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What every token starts with, so that one pasted into a config or a log is recognisable.
pub const PREFIX: &str = "cubatok_";
/// Tokens kept at most: the file is read whole on every change.
pub const MAX_TOKENS: usize = 1000;

/// One token as the file keeps it (never the token itself).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// SHA-256 of the token, lowercase hex.
    pub hash: String,
    /// Seconds since the epoch.
    pub created: u64,
    /// Seconds since the epoch after which the token fails; none: it does not expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// The hosts (`[hosts.NAME]`) it may reach besides this machine; none: all that policy allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// Only these commands (as `allowed_commands`); none: what policy allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Only under these directories (as `allowed_dirs`); the first is the default working
    /// directory. None: the daemon user's home and what policy allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<Vec<String>>,
    /// CPU, memory and process limits over everything it starts together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::Budget>,
}

/// The file: tokens by name.
#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Tokens {
    #[serde(default)]
    pub tokens: BTreeMap<String, Entry>,
}

/// The token's SHA-256 in lowercase hex.
pub fn hash(token: &str) -> String {
    let mut text = String::with_capacity(64);
    push_hex(&mut text, &Sha256::digest(token.as_bytes()));
    text
}

/// A new token: the prefix and 32 random bytes in hex.
pub fn generate() -> io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(io::Error::other)?;
    let mut text = String::from(PREFIX);
    push_hex(&mut text, &bytes);
    Ok(text)
}

/// `bytes` in lowercase hex, appended to `text`.
fn push_hex(text: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        text.push(char::from(HEX[usize::from(b >> 4)]));
        text.push(char::from(HEX[usize::from(b & 15)]));
    }
}

/// A name a token may have: what a person types, and what shows as the owner of its processes.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c));
    match ok {
        true => Ok(()),
        false => Err(format!(
            "{name:?} is not a token name: use 1 to 64 letters, digits, '-', '_', '.' or '@'"
        )),
    }
}

impl Tokens {
    /// The file at `path`; a missing file has no tokens.
    pub fn load(path: &Path) -> Result<Tokens, String> {
        let text = match crate::safe_fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Tokens::default()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let tokens: Tokens =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if tokens.tokens.len() > MAX_TOKENS {
            return Err(format!(
                "{}: {} tokens, more than the {MAX_TOKENS} kept",
                path.display(),
                tokens.tokens.len()
            ));
        }
        Ok(tokens)
    }

    /// Writes the file whole (mode 0600): a new file renamed over the old, so a reader sees
    /// either the old tokens or the new, never half.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = toml::to_string(self).map_err(|e| e.to_string())?;
        let text = format!(
            "# cuba-exec bearer tokens: only their SHA-256 is kept. Managed by `cubactl token`.\n{text}"
        );
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::safe_fs::owner_only_dir()
                .recursive(true)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".new");
        let tmp = PathBuf::from(tmp);
        crate::safe_fs::write_new(&tmp, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The token whose SHA-256 is `hash`, by name.
    pub fn find(&self, hash: &str) -> Option<(&str, &Entry)> {
        self.tokens
            .iter()
            .find(|(_, e)| e.hash == hash)
            .map(|(n, e)| (n.as_str(), e))
    }
}

/// Why a presented token is refused, as the 401 says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Missing,
    Unknown,
    Expired,
    /// The daemon, which keeps the tokens, could not be asked (a 503, not a 401).
    Unavailable,
}

impl Refused {
    /// The `error_description` of the `WWW-Authenticate` header (RFC 6750).
    pub fn describe(self) -> &'static str {
        match self {
            Refused::Missing => {
                "no bearer token: send Authorization: Bearer <token> (cubactl token create NAME)"
            }
            Refused::Unknown => {
                "the token is not known: it was revoked or never issued (cubactl token list)"
            }
            Refused::Expired => "the token has expired (cubactl token create gives a new one)",
            Refused::Unavailable => {
                "the daemon that keeps the tokens cannot be reached; try again shortly"
            }
        }
    }
}

/// Whether `entry` may be used at `now` (seconds since the epoch).
pub fn usable(entry: &Entry, now: u64) -> Result<(), Refused> {
    match entry.expires {
        Some(t) if now >= t => Err(Refused::Expired),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tokens_round_trip_with_only_their_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/tokens.toml");
        let token = generate().unwrap();
        assert!(token.starts_with(PREFIX) && token.len() == PREFIX.len() + 64);
        let mut tokens = Tokens::default();
        tokens.tokens.insert(
            "phone".into(),
            Entry {
                hash: hash(&token),
                created: 1,
                expires: Some(10),
                hosts: Some(vec!["build".into()]),
                allow: None,
                roots: Some(vec!["/srv".into()]),
                budget: Some(crate::Budget {
                    cpu_millis: Some(1500),
                    memory: None,
                    pids: Some(64),
                }),
            },
        );
        tokens.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&token[PREFIX.len()..]), "{text}");
        let back = Tokens::load(&path).unwrap();
        assert_eq!(back, tokens);
        let (name, entry) = back.find(&hash(&token)).unwrap();
        assert_eq!(name, "phone");
        assert_eq!(usable(entry, 9), Ok(()));
        assert_eq!(usable(entry, 10), Err(Refused::Expired));
        assert!(back.find(&hash("cubatok_other")).is_none());
        assert_eq!(
            Tokens::load(&dir.path().join("none")).unwrap(),
            Tokens::default()
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("laptop-1").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name(&"x".repeat(65)).is_err());
    }

    #[test]
    fn the_hash_is_sha256() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
