//! The HTTP endpoint's bearer tokens: made and revoked only by a person (`TokenCreate`,
//! `TokenRevoke`), listed by anyone (`TokenList`: never the tokens), and checked for each HTTP
//! request (`TokenCheck`, by the token's SHA-256).

use cuba_protocol::{ProtocolError, Response, TokenCreate};

use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

pub fn create(d: &Daemon, caller: &Caller, r: TokenCreate) -> Result<Response, ProtocolError> {
    super::person(d, caller, "token create", "make a token")?;
    if r.budget.is_some_and(|b| !b.is_empty()) {
        d.launcher()
            .budgets()
            .can_apply()
            .map_err(|why| ProtocolError::bad_request(format!("a token's budget: {why}")))?;
    }
    let made = d.bearer().create(r)?;
    tracing::info!(name = %made.info.name, "token made");
    Ok(Response::TokenMade(made))
}

pub fn revoke(d: &Daemon, caller: &Caller, name: &str) -> Result<Response, ProtocolError> {
    super::person(d, caller, "token revoke", "revoke a token")?;
    d.bearer().revoke(name)?;
    tracing::info!(name, "token revoked");
    Ok(Response::Ok)
}

pub fn list(d: &Daemon) -> Response {
    Response::Tokens(d.bearer().list())
}

pub fn check(d: &Daemon, hash: &str) -> Response {
    Response::Token(d.bearer().check(hash))
}
