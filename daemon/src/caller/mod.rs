//! The caller of a request: the client (from its handshake), the policy its connection is held
//! to, and the kernel's word on who is at the other end. Built once per connection, at accept
//! and handshake, and handed to every request of that connection.

mod ancestry;

use std::sync::Arc;

use cuba_protocol::{ClientInfo, Owner};

use crate::audit::Peer;
use crate::policy::{Effective, Policy};
use crate::table::Table;
pub use ancestry::Origin;

pub struct Caller {
    pub client: ClientInfo,
    /// The daemon's policy, narrowed by the client's own settings and, for a connection from
    /// inside one of our process trees, by that tree's owner's policy.
    pub policy: Arc<Effective>,
    pub peer: Peer,
}

impl Caller {
    /// Where the connection from `peer` comes from: decided at accept, before anything is read
    /// from it (the peer could exit and its pid be reused meanwhile).
    pub fn origin(table: &Table, peer: Peer) -> Origin {
        ancestry::origin(table, peer.pid)
    }

    /// The caller once the handshake said who the client is.
    pub fn new(
        table: &Table,
        daemon_policy: &Policy,
        origin: &Origin,
        peer: Peer,
        client: ClientInfo,
    ) -> Caller {
        let policy = Arc::new(ancestry::effective(table, daemon_policy, origin, &client));
        Caller {
            client,
            policy,
            peer,
        }
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
        }
    }
}
