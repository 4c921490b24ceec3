//! `PolicyCheck`: what the connection's policy says about shell text, without running it.

use cuba_protocol::Response;

use crate::caller::Caller;

pub fn policy_check(caller: &Caller, text: &str) -> Response {
    Response::Policy(caller.policy.check(text))
}
