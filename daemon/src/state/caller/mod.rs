//! The caller of a request: the client (from its handshake), the policy its connection is held
//! to, and the kernel's word on who is at the other end. Built once per connection, at accept
//! and handshake, and handed to every request of that connection.

mod ancestry;

use std::sync::Arc;

use cuba_protocol::{ClientInfo, ClientKind, ErrorKind, Owner, ProtocolError};

use crate::base::policy::{Effective, Policy};
use crate::state::audit::Peer;
use crate::state::genuine::Refusal;
use crate::state::record::ProcData;
use crate::state::table::{NewRecord, Table};
pub use ancestry::Origin;

#[derive(Clone)]
pub struct Caller {
    pub client: ClientInfo,
    /// The daemon's policy, narrowed by the client's own settings and, for a connection from
    /// inside one of our process trees, by that tree's owner's policy.
    pub policy: Arc<Effective>,
    pub peer: Peer,
    /// Where the connection comes from when that is inside one of the daemon's process trees
    /// (or cannot be told): a process there may not answer a question put to the person.
    pub inside: Option<String>,
    tree: Option<u64>,
    /// Set for a confined caller: one whose own settings narrow what it may run or where
    /// (`CUBA_EXEC_ALLOWED_COMMANDS` / `CUBA_EXEC_ALLOWED_DIRS`, as a narrowed token's do), or
    /// one inside the tree of a confined caller's process. It reaches only the records it
    /// started; `None` reaches the shared table.
    pub tenant: Option<Arc<str>>,
    /// The process that made the connection, judged as the askpass helper when it connected
    /// (from inside a tree only): its program, or why it may not ask for a password.
    pub helper: Result<String, Refusal>,
}

impl Caller {
    /// Where the connection from `peer` comes from: decided at accept, before anything is read
    /// from it (the peer could exit and its pid be reused meanwhile).
    pub fn origin(table: &Table, peer: Peer) -> Origin {
        ancestry::origin(table, peer.pid)
    }

    /// The caller once the handshake said who the client is; `helper`: the peer judged as the
    /// askpass helper when it connected.
    pub fn new(
        table: &Table,
        daemon_policy: &Policy,
        (origin, helper): (&Origin, Result<String, Refusal>),
        peer: Peer,
        client: ClientInfo,
    ) -> Caller {
        let policy = Arc::new(ancestry::effective(table, daemon_policy, origin, &client));
        let inside = match origin {
            Origin::Outside => None,
            Origin::Process { id, .. } => Some(format!("the tree of process {id}")),
            Origin::Unknown(why) => Some(format!("a process tree of this daemon ({why})")),
        };
        let tree = match origin {
            Origin::Process { id, .. } => Some(*id),
            _ => None,
        };
        let tenant = tenant(table, origin, &client);
        Caller {
            client,
            policy,
            peer,
            inside,
            tree,
            tenant,
            helper,
        }
    }

    /// Refuses a person's part (approving, denying, giving a password, changing the daemon,
    /// its settings or its tokens) to a process that runs inside one of the daemon's trees: an
    /// agent must not act as the person. The origin is the kernel's (the peer's ancestry at
    /// accept), never what the client says of itself.
    pub fn must_be_a_person(&self, what: &str) -> Result<(), cuba_protocol::ProtocolError> {
        match &self.inside {
            None => Ok(()),
            Some(where_) => Err(cuba_protocol::ProtocolError::new(
                cuba_protocol::ErrorKind::Blocked,
                format!(
                    "only a person can {what} (rule person_only): this request comes from \
                     inside {where_}, which cuba-exec started; do it from a terminal of your \
                     own (`cubactl`) or in the MCP client"
                ),
            )),
        }
    }

    /// The process whose tree the connection comes from, when known.
    pub fn tree(&self) -> Option<u64> {
        self.tree
    }

    /// Who this caller is, as an answer names them: the user and the channel.
    pub fn answerer(&self) -> crate::state::audit::Who {
        let user = user_name(self.peer.uid);
        let channel = match self.client.kind {
            cuba_protocol::ClientKind::Cli => "cubactl".to_string(),
            cuba_protocol::ClientKind::Mcp => {
                format!("elicitation in {}", self.client.name)
            }
            _ => self.client.name.clone(),
        };
        crate::state::audit::Who { by: user, channel }
    }

    /// Who asks, for the audit log.
    pub fn who(&self) -> (&ClientInfo, Peer) {
        (&self.client, self.peer)
    }

    /// Whether this caller may see and act on `rec`: its own, or any when it is not confined.
    pub fn reaches(&self, rec: &ProcData) -> bool {
        self.tenant.is_none() || rec.tenant == self.tenant
    }

    /// Why this caller may not act on `rec` (type into it, signal it), if it may not: acting
    /// on a process is held to the check its start was, in this caller's policy — a caller
    /// may not steer a program it could not have started. A person at a terminal (`cubactl`
    /// outside every tree) is not held to it: a stop must always be theirs to give.
    pub fn may_act_on(&self, rec: &ProcData, act: &str) -> Result<(), ProtocolError> {
        let person = self.inside.is_none() && self.client.kind == ClientKind::Cli;
        if person || rec.info().kind == cuba_protocol::ProcKind::InSession {
            // A session's command is its shell's: the shell's record is checked instead.
            return Ok(());
        }
        let decision = self.policy.check_spawn(
            None,
            &rec.info().command,
            std::path::Path::new(&rec.info().cwd),
        );
        match decision.allowed {
            true => Ok(()),
            false => Err(ProtocolError::new(
                ErrorKind::Blocked,
                format!(
                    "cannot {act} process {}: this client could not start it ({}; rule {}), \
                     so it may not steer it either",
                    rec.info().id,
                    decision.message,
                    decision.rule.as_deref().unwrap_or("policy")
                ),
            )),
        }
    }

    /// The row of a command `req` this caller starts in `cwd`.
    pub fn new_record(
        &self,
        req: &cuba_protocol::SpawnRequest,
        cwd: &std::path::Path,
    ) -> NewRecord {
        NewRecord {
            tenant: self.tenant.clone(),
            ..NewRecord::of(self.owner(), req, cwd)
        }
    }

    /// The owner of what this caller starts.
    pub fn owner(&self) -> Owner {
        Owner {
            kind: self.client.kind,
            name: self.client.name.clone(),
            pid: self.client.pid,
        }
    }
}

/// Variables of a client's own settings that confine it to its own records.
const CONFINING: [&str; 2] = ["CUBA_EXEC_ALLOWED_COMMANDS", "CUBA_EXEC_ALLOWED_DIRS"];

/// The tenant of a connection: from inside a tree, that tree's (none for an unconfined
/// caller's); from outside, its own when its settings narrow what it may run or where (named by
/// its kind and name, so an editor restarted with the same settings reaches what it started
/// before), else none. Inside a tree that cannot be told, and with confined callers about, a
/// tenant that owns nothing: the conservative answer, as the policy's is.
fn tenant(table: &Table, origin: &Origin, client: &ClientInfo) -> Option<Arc<str>> {
    match origin {
        // Inside a tree, the tree's owner decides: what a command says of itself counts for
        // nothing, and a confined caller's command is confined as its caller is.
        Origin::Process { id, .. } => {
            return table.get(*id).ok().and_then(|p| p.lock().tenant.clone());
        }
        Origin::Unknown(_) => {
            let confined = table.all().iter().any(|p| p.lock().tenant.is_some());
            return confined.then(|| Arc::from("\0unknown tree"));
        }
        Origin::Outside => {}
    }
    let confining = client
        .env
        .iter()
        .any(|(k, v)| !v.is_empty() && k.to_str().is_some_and(|k| CONFINING.contains(&k)));
    confining.then(|| Arc::from(format!("{:?}:{}", client.kind, client.name)))
}

/// The user an answer is recorded as.
#[cfg(unix)]
fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| format!("{} (uid {uid})", u.name))
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// The user an answer is recorded as: the daemon's, the only one its pipe lets in.
#[cfg(windows)]
fn user_name(_: u32) -> String {
    std::env::var("USERNAME").unwrap_or_else(|_| "this user".to_string())
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A caller of kind `Other` with `env` as its environment and the default policy.
    pub fn caller_with_env(env: &[(&str, &str)]) -> Caller {
        let client = ClientInfo {
            kind: cuba_protocol::ClientKind::Other,
            name: "test".into(),
            pid: 1,
            cwd: "/".into(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        };
        Caller {
            client,
            policy: Arc::new(Effective::daemon(&Policy::default())),
            peer: Peer {
                uid: 0,
                pid: Some(1),
            },
            inside: None,
            tree: None,
            tenant: None,
            helper: Err(Refusal::new(1, "unknown", "not the askpass helper")),
        }
    }
}
