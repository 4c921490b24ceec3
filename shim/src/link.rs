//! The shim's connection to `cubad`: made on the first tool call (so the owner name can come
//! from the MCP client), shared by all calls, remade if the daemon went away.

use std::path::PathBuf;

use cuba_protocol::client::{this_client, Client, ClientError};
use cuba_protocol::ClientKind;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use tokio::sync::Mutex;

/// Attempts after a lost connection before the error reaches the model; with the doubling
/// pause that is about 2.5 s, long enough for a killed daemon to finish dying and another start.
const RETRIES: u32 = 8;

pub struct Link {
    socket: PathBuf,
    client: Mutex<Option<Client>>,
}

impl Link {
    pub fn new(socket: PathBuf) -> Link {
        Link {
            socket,
            client: Mutex::new(None),
        }
    }

    /// Runs `f` with the connection; if the connection turns out to be dead (the daemon was
    /// restarted or killed since the last call), connects again (starting a daemon) and retries
    /// once. Returns the connection used, for the calls that follow.
    pub async fn with<T, F, Fut>(
        &self,
        ctx: &RequestContext<RoleServer>,
        f: F,
    ) -> Result<(Client, T), ClientError>
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let mut attempt = 0;
        loop {
            let result = match self.client(ctx).await {
                Ok(client) => f(client.clone()).await.map(|value| (client, value)),
                Err(e) => Err(e),
            };
            match result {
                // The daemon went away under us (a restart, a crash; a dying daemon's socket can
                // even accept a last connection and close it): forget the connection; the next
                // attempt connects again, starting a daemon if none answers.
                Err(e) if e.connection_lost() && attempt < RETRIES => {
                    attempt += 1;
                    tracing::debug!(attempt, "connection to cubad lost; connecting again");
                    self.client.lock().await.take();
                    tokio::time::sleep(std::time::Duration::from_millis(10 << attempt)).await;
                }
                other => return other,
            }
        }
    }

    /// The connection, made (and the daemon started) if needed.
    pub async fn client(&self, ctx: &RequestContext<RoleServer>) -> Result<Client, ClientError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let name = ctx
            .client_info()
            .map(|i| i.name)
            .filter(|n| !n.trim().is_empty())
            .or_else(crate::platform::parent_name)
            .unwrap_or_else(|| "mcp-client".to_string());
        let client =
            Client::connect_or_start(&self.socket, this_client(ClientKind::Mcp, name)).await?;
        *slot = Some(client.clone());
        Ok(client)
    }
}
