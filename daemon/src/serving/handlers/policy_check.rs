//! `PolicyCheck`: what the connection's policy says about shell text, without running it.

use cuba_protocol::Response;

use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

/// As a spawn with the daemon's shell would be judged: parsed, or (a shell whose text the
/// policy cannot read) as a whole.
pub fn policy_check(d: &Daemon, caller: &Caller, text: &str) -> Response {
    match super::spawn::unread_shell(d, None) {
        Some(shell) => {
            let cwd = std::path::Path::new(&caller.client.cwd);
            Response::Policy(caller.policy.check_unread(shell, text, cwd))
        }
        None => Response::Policy(caller.policy.check(text)),
    }
}
