//! What only the person may change, done by the daemon: bearer tokens of the HTTP endpoint,
//! reading hand-edited settings again, and the other verbs a client asks the daemon's leave
//! for. Each is refused on a connection made from inside a process tree the daemon started.

use serde::{Deserialize, Serialize};

/// Make a bearer token for the HTTP endpoint ([`crate::Request::TokenCreate`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TokenCreate {
    pub name: String,
    /// Hosts besides this machine it may reach; none: all the policy allows.
    pub hosts: Option<Vec<String>>,
    /// Only these commands (as `allowed_commands`).
    pub allow: Option<Vec<String>>,
    /// Only under these absolute directories; the first is where its commands start.
    pub roots: Option<Vec<String>>,
    /// Seconds it works for; none: until revoked.
    pub expires_in: Option<u64>,
    /// Limits over everything it starts together (its agent's budget).
    pub budget: Option<super::Budget>,
    /// Replace a token of the same name.
    pub replace: bool,
}

/// One token as the daemon keeps it: never the token itself.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TokenInfo {
    pub name: String,
    /// Seconds since the epoch.
    pub created: u64,
    pub expires: Option<u64>,
    pub hosts: Option<Vec<String>>,
    pub allow: Option<Vec<String>>,
    pub roots: Option<Vec<String>>,
    pub budget: Option<super::Budget>,
}

/// A token just made ([`crate::Response::TokenMade`]): shown this once.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TokenMade {
    pub token: String,
    pub info: TokenInfo,
    /// The file that keeps its hash.
    pub file: String,
}

/// Every token ([`crate::Response::Tokens`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
    pub file: String,
    /// How the file differs from what the daemon uses, when it was edited by hand since the
    /// daemon read it (`cubactl daemon reload` applies it); empty when it does not.
    pub unconfirmed: Vec<String>,
}

/// What the daemon says of a presented token ([`crate::Request::TokenCheck`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum TokenVerdict {
    Valid(TokenInfo),
    /// Not issued, or revoked.
    Unknown,
    Expired,
}

/// What changed when the daemon read its files again ([`crate::Request::Reload`], and the
/// answer to [`crate::Request::Upgrade`]): one line per change, for the person.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub lines: Vec<String>,
}

/// A person's verb a client carries out itself, asked of the daemon first
/// ([`crate::Request::Authorize`]).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// `cubactl http start`.
    HttpStart,
}

impl Verb {
    /// What the person does, as a refusal names it.
    pub fn describe(self) -> &'static str {
        match self {
            Verb::HttpStart => "start the HTTP endpoint",
        }
    }
}
