//! The person's verbs on the daemon: bearer tokens, reloading hand-edited files, the HTTP
//! endpoint. The daemon refuses each from inside a process tree it started.

use super::stream::unexpected;
use super::{Client, ClientError};
use crate::message::*;

impl Client {
    /// Makes a bearer token (shown this once).
    pub async fn token_create(&self, req: TokenCreate) -> Result<TokenMade, ClientError> {
        match self.call(Request::TokenCreate(req)).await? {
            Response::TokenMade(m) => Ok(m),
            other => Err(unexpected(other)),
        }
    }

    /// Revokes the bearer token called `name`.
    pub async fn token_revoke(&self, name: &str) -> Result<(), ClientError> {
        match self.call(Request::TokenRevoke(name.to_string())).await? {
            Response::Ok => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Every bearer token (never the tokens themselves).
    pub async fn token_list(&self) -> Result<TokenList, ClientError> {
        match self.call(Request::TokenList).await? {
            Response::Tokens(t) => Ok(t),
            other => Err(unexpected(other)),
        }
    }

    /// What the token whose SHA-256 (hex) is `hash` may do.
    pub async fn token_check(&self, hash: String) -> Result<TokenVerdict, ClientError> {
        match self.call(Request::TokenCheck(hash)).await? {
            Response::Token(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    /// Puts hand edits of the approvals and tokens in effect; what changed.
    pub async fn reload(&self) -> Result<Changes, ClientError> {
        match self.call(Request::Reload).await? {
            Response::Reloaded(c) => Ok(c),
            other => Err(unexpected(other)),
        }
    }

    /// Whether this connection may do `verb` (a person's, carried out by the client).
    pub async fn authorize(&self, verb: Verb) -> Result<(), ClientError> {
        match self.call(Request::Authorize(verb)).await? {
            Response::Ok => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Stops the HTTP endpoint whose pid is `pid`.
    pub async fn http_stop(&self, pid: u32) -> Result<(), ClientError> {
        match self.call(Request::HttpStop(pid)).await? {
            Response::Ok => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}
