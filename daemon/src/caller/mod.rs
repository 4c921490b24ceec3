//! The caller of a request: the client (from its handshake), the policy its connection is held
//! to, and the kernel's word on who is at the other end. Built once per connection, at accept
//! and handshake, and handed to every request of that connection.

mod ancestry;

use std::sync::Arc;

use cuba_protocol::{ClientInfo, Owner};

use crate::audit::Peer;
use crate::genuine::Refusal;
use crate::policy::{Effective, Policy};
use crate::table::Table;
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
        Caller {
            client,
            policy,
            peer,
            inside,
            tree,
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
    pub fn answerer(&self) -> crate::asks::Who {
        let uid = self.peer.uid;
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| format!("{} (uid {uid})", u.name))
            .unwrap_or_else(|| format!("uid {uid}"));
        let channel = match self.client.kind {
            cuba_protocol::ClientKind::Cli => "cubactl".to_string(),
            cuba_protocol::ClientKind::Mcp => {
                format!("elicitation in {}", self.client.name)
            }
            _ => self.client.name.clone(),
        };
        crate::asks::Who { by: user, channel }
    }

    /// Who asks, for the audit log.
    pub fn who(&self) -> (&ClientInfo, Peer) {
        (&self.client, self.peer)
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
            helper: Err(Refusal::new(1, "unknown", "not the askpass helper")),
        }
    }
}
