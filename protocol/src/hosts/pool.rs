//! A client's connections: this machine's daemon and one per host, each made on first use and
//! kept (no ssh handshake per call), remade once it has dropped. Each has its own lock, so a
//! host that is slow to connect holds up only the calls to that host.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::Mutex as AsyncMutex;

use super::{bridge, Hosts, LOCAL};
use crate::client::{Client, ClientError};
use crate::message::ClientInfo;

type Slot = Arc<AsyncMutex<Held>>;

/// One host's connection, and what this client has been through with it.
#[derive(Default)]
struct Held {
    client: Option<Client>,
    /// A connection to it was made before: a container found stopped now stopped under this
    /// client, which is told so before it is started again.
    reached: bool,
}

pub struct Pool {
    socket: PathBuf,
    hosts: Hosts,
    /// This machine's daemon is told the client is not one of its processes (an HTTP
    /// session): what it starts gets the daemon's environment and the client's narrowing.
    remote: bool,
    slots: Mutex<HashMap<String, Slot>>,
}

/// `None`, `""` and `local` all name this machine.
pub fn is_local(host: Option<&str>) -> bool {
    host.is_none_or(|h| h.is_empty() || h == LOCAL)
}

/// The name `host`'s connection is kept under: `local` for this machine however it was named.
fn slot_name(host: Option<&str>) -> &str {
    match host {
        Some(h) if !is_local(host) => h,
        _ => LOCAL,
    }
}

impl Pool {
    /// Connections to the daemon on `socket` and to `hosts`.
    pub fn new(socket: PathBuf, hosts: Hosts) -> Pool {
        Pool {
            socket,
            hosts,
            remote: false,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// Connections for a caller that is not a process of this machine (see [`Pool::remote`]).
    pub fn remote(mut self) -> Pool {
        self.remote = true;
        self
    }

    pub fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn slot(&self, name: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(name.to_string()).or_default().clone()
    }

    /// The connection to `host` (this machine when `None` or `local`), made if there is none
    /// or it has dropped: for this machine by starting a daemon if none runs, for a host
    /// through its bridge. `who` is this client, asked only when a connection is made.
    pub async fn client(
        &self,
        host: Option<&str>,
        who: impl FnOnce() -> ClientInfo,
    ) -> Result<Client, ClientError> {
        let name = slot_name(host);
        let spec = match name {
            LOCAL => None,
            _ => Some(self.hosts.get(name).map_err(ClientError::Host)?),
        };
        let slot = self.slot(name);
        let mut held = slot.lock().await;
        if let Some(c) = held.client.as_ref().filter(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let client = match spec {
            None => {
                let hello = crate::message::Hello {
                    client: who(),
                    remote: self.remote,
                };
                Client::connect_or_start_as(&self.socket, hello).await?
            }
            Some(spec) => {
                let hello = bridge::remote_hello(who(), spec);
                match bridge::connect(spec, hello, !held.reached).await {
                    Ok(client) => {
                        if let Some(every) = spec.keepalive {
                            tokio::spawn(keepalive(Arc::downgrade(&slot), every));
                        }
                        client
                    }
                    Err(e) => {
                        // Said once; the next call starts from scratch.
                        held.reached = false;
                        return Err(e);
                    }
                }
            }
        };
        held.client = Some(client.clone());
        held.reached = true;
        Ok(client)
    }

    /// Forgets `host`'s connection (it was found dead): the next call makes a new one.
    pub async fn forget(&self, host: Option<&str>) {
        self.slot(slot_name(host)).lock().await.client.take();
    }
}

/// Keeps a host's link from sitting idle (a kubelet ends an idle exec stream): a status
/// request every `every`. Ends with the link, or when the pool is gone.
async fn keepalive(slot: std::sync::Weak<AsyncMutex<Held>>, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(slot) = slot.upgrade() else { return };
        let client = slot.lock().await.client.clone();
        drop(slot);
        match client.filter(Client::is_alive) {
            Some(c) => {
                if let Err(e) = c.status().await {
                    tracing::debug!("keep-alive: {e}");
                }
            }
            None => return,
        }
    }
}
