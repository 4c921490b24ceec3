//! The shim's connections: to this machine's `cubad` and to each host's, made on the first
//! call that needs it (so the owner name can come from the MCP client), shared by all calls,
//! remade if the daemon went away or the bridge dropped. A lost connection is retried only for
//! requests that are safe to repeat: reads, and actions carrying a request token (the daemon
//! answers a repeat with the first attempt's result).

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use cuba_protocol::client::{this_client, Client, ClientError};
use cuba_protocol::hosts::{self, Hosts, Pool};
use cuba_protocol::{ClientInfo, ClientKind};
use rmcp::service::RequestContext;
use rmcp::RoleServer;

/// Attempts after a lost connection before the error reaches the model; with the doubling
/// pause that is about 2.5 s, long enough for a killed daemon to finish dying and another start.
const RETRIES: u32 = 8;

/// Whether the daemon may see a request twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// A read (info, read, wait, list, screen, status): asking again changes nothing, so any
    /// lost connection is retried.
    Safe,
    /// A signal (no token): sent again only when the daemon cannot have seen it.
    IfUnsent,
    /// A spawn, run, ensure or stdin write carrying a request token: the daemon carries it out
    /// once however often it arrives, so any lost connection is retried with the same request.
    Tokened,
}

/// Why [`Link::call`] gave up.
#[derive(Debug)]
pub enum LinkError {
    /// The daemon refused the request, could not be reached, or never received it.
    Failed(ClientError),
    /// The connection was lost after a [`Repeat::IfUnsent`] request was sent: the daemon may
    /// have carried it out.
    MaybeDone(ClientError),
}

/// Whether to connect again and repeat the request after `e`. `connecting`: the error came
/// from making the connection, before the request was sent.
pub fn retry(repeat: Repeat, connecting: bool, e: &ClientError) -> bool {
    e.connection_lost() && (connecting || repeat != Repeat::IfUnsent || e.nothing_sent())
}

/// How the last error of [`Link::call`] reaches the caller.
fn give_up(repeat: Repeat, connecting: bool, e: ClientError) -> LinkError {
    // A tokened request given up on after its retries may still have been done once.
    let maybe_done =
        repeat != Repeat::Safe && !connecting && e.connection_lost() && !e.nothing_sent();
    match maybe_done {
        true => LinkError::MaybeDone(e),
        false => LinkError::Failed(e),
    }
}

pub struct Link {
    pool: Pool,
    /// Who the daemon is told the client is; `None`: this process, named by its MCP client.
    who: Option<ClientInfo>,
    /// Why the hosts configuration could not be read: reported when a host is asked for
    /// (this machine keeps working).
    hosts_error: Option<String>,
}

impl Link {
    /// This machine's daemon on `socket`, and the hosts of config.toml and `CUBA_EXEC_HOSTS`.
    pub fn new(socket: PathBuf) -> Link {
        let (hosts, hosts_error) = match hosts::load_env() {
            Ok(h) => (h, None),
            Err(e) => {
                tracing::warn!("hosts not configured: {e}");
                (Hosts::default(), Some(e))
            }
        };
        Link {
            pool: Pool::new(socket, hosts),
            who: None,
            hosts_error,
        }
    }

    /// The connections of a caller that is not a process of this machine (an HTTP session's
    /// token): `who` names it and carries its narrowing, `hosts` are those it may reach.
    pub fn for_caller(&self, hosts: Hosts, who: ClientInfo) -> Link {
        Link {
            pool: Pool::new(self.pool.socket().to_path_buf(), hosts).remote(),
            who: Some(who),
            hosts_error: self.hosts_error.clone(),
        }
    }

    pub fn hosts(&self) -> &Hosts {
        self.pool.hosts()
    }

    /// Why the hosts configuration could not be read, if it could not.
    pub fn hosts_error(&self) -> Option<&str> {
        self.hosts_error.as_deref()
    }

    /// Runs `f` with the connection to `host` (`None`: this machine). If the connection turns
    /// out to be dead (the daemon was restarted or killed since the last call, a bridge
    /// dropped), connects again (starting a local daemon) and runs `f` again, as far as
    /// `repeat` allows. Returns the connection used, for the calls that follow.
    pub async fn call<T, F, Fut>(
        &self,
        ctx: &RequestContext<RoleServer>,
        host: Option<&str>,
        repeat: Repeat,
        f: F,
    ) -> Result<(Client, T), LinkError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let mut attempt = 0;
        loop {
            let (connecting, e) = match self.client(ctx, host).await {
                Ok(client) => match f(client.clone()).await {
                    Ok(value) => return Ok((client, value)),
                    Err(e) => (false, e),
                },
                Err(e) => (true, e),
            };
            if attempt >= RETRIES || !retry(repeat, connecting, &e) {
                return Err(give_up(repeat, connecting, e));
            }
            // The daemon went away under us (a restart, a crash; a dying daemon's socket can
            // even accept a last connection and close it), or the bridge to it dropped:
            // forget the connection; the next attempt connects again.
            attempt += 1;
            tracing::debug!(attempt, ?host, "connection to cubad lost; connecting again");
            self.pool.forget(host).await;
            tokio::time::sleep(Duration::from_millis(10 << attempt)).await;
        }
    }

    /// A read of this machine's daemon made for the endpoint itself, not for an MCP request
    /// (a token's check): repeated on a new connection after a lost one.
    pub async fn daemon<T, F, Fut>(&self, f: F) -> Result<T, ClientError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let mut attempt = 0;
        loop {
            let client = self.pool.client(None, || {
                this_client(ClientKind::Mcp, "cuba-exec serve --http".to_string())
            });
            let (connecting, e) = match client.await {
                Ok(client) => match f(client).await {
                    Ok(value) => return Ok(value),
                    Err(e) => (false, e),
                },
                Err(e) => (true, e),
            };
            if attempt >= RETRIES || !retry(Repeat::Safe, connecting, &e) {
                return Err(e);
            }
            attempt += 1;
            self.pool.forget(None).await;
            tokio::time::sleep(Duration::from_millis(10 << attempt)).await;
        }
    }

    /// The connection to `host`, made (and a local daemon started) if needed.
    pub async fn client(
        &self,
        ctx: &RequestContext<RoleServer>,
        host: Option<&str>,
    ) -> Result<Client, ClientError> {
        if let (Some(e), false) = (&self.hosts_error, hosts::is_local(host)) {
            return Err(ClientError::Host(format!("hosts are not configured: {e}")));
        }
        if let Some(who) = &self.who {
            return self.pool.client(host, || who.clone()).await;
        }
        let name = ctx
            .client_info()
            .map(|i| i.name)
            .filter(|n| !n.trim().is_empty())
            .or_else(crate::platform::parent_name)
            .unwrap_or_else(|| "mcp-client".to_string());
        self.pool
            .client(host, || this_client(ClientKind::Mcp, name))
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use cuba_protocol::{ErrorKind, ProtocolError};

    use super::*;

    fn io_error() -> ClientError {
        ClientError::Io(io::Error::new(io::ErrorKind::BrokenPipe, "broken pipe"))
    }

    fn refused() -> ClientError {
        ClientError::Connect {
            path: PathBuf::from("/nowhere"),
            source: io::Error::new(io::ErrorKind::ConnectionRefused, "refused"),
        }
    }

    fn remote() -> ClientError {
        ClientError::Remote(ProtocolError {
            kind: ErrorKind::NotFound,
            message: "no process 7".into(),
            reason: None,
        })
    }

    #[test]
    fn reads_are_retried_on_any_lost_connection() {
        for e in [
            ClientError::Closed,
            ClientError::Gone,
            io_error(),
            refused(),
        ] {
            assert!(retry(Repeat::Safe, false, &e), "{e}");
        }
    }

    #[test]
    fn actions_are_retried_only_when_nothing_was_sent() {
        assert!(retry(Repeat::IfUnsent, false, &ClientError::Gone));
        // Closed or broken after the frame went out: the daemon may have acted on it.
        assert!(!retry(Repeat::IfUnsent, false, &ClientError::Closed));
        assert!(!retry(Repeat::IfUnsent, false, &io_error()));
        // Lost while connecting: the request itself was never sent.
        assert!(retry(Repeat::IfUnsent, true, &ClientError::Closed));
        assert!(retry(Repeat::IfUnsent, true, &refused()));
    }

    #[test]
    fn tokened_actions_are_retried_on_any_lost_connection_and_may_be_done_when_given_up() {
        for e in [ClientError::Closed, ClientError::Gone, io_error()] {
            assert!(retry(Repeat::Tokened, false, &e), "{e}");
        }
        assert!(!retry(Repeat::Tokened, false, &remote()));
        let given_up = give_up(Repeat::Tokened, false, ClientError::Closed);
        assert!(matches!(given_up, LinkError::MaybeDone(_)));
    }

    #[test]
    fn answers_and_failed_starts_are_not_retried() {
        let start = ClientError::Start {
            exe: PathBuf::from("cubad"),
            reason: "not found".into(),
        };
        for repeat in [Repeat::Safe, Repeat::IfUnsent, Repeat::Tokened] {
            assert!(!retry(repeat, false, &remote()));
            assert!(!retry(repeat, true, &start));
        }
    }

    #[test]
    fn an_action_lost_after_sending_may_have_been_done() {
        let maybe = |repeat, connecting, e| {
            matches!(give_up(repeat, connecting, e), LinkError::MaybeDone(_))
        };
        assert!(maybe(Repeat::IfUnsent, false, ClientError::Closed));
        assert!(maybe(Repeat::IfUnsent, false, io_error()));
        assert!(!maybe(Repeat::IfUnsent, false, ClientError::Gone));
        assert!(!maybe(Repeat::IfUnsent, false, remote()));
        assert!(!maybe(Repeat::IfUnsent, true, ClientError::Closed));
        assert!(!maybe(Repeat::Safe, false, ClientError::Closed));
    }
}
