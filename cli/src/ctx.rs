//! What every subcommand gets: where the daemon is, which host it is aimed at, how to style
//! output, and connections (one per host, kept for the whole command).

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use cuba_protocol::client::{this_client, Client, ClientError};
use cuba_protocol::hosts::{self, Hosts, Pool};
use cuba_protocol::ClientKind;

use crate::style::{ColorChoice, Style};
use crate::term;

/// Attempts of [`Ctx::once`] after a lost connection (the shim's number: long enough for a
/// killed daemon to finish dying and another to start).
const RETRIES: u32 = 8;

pub struct Ctx {
    pub socket: PathBuf,
    /// The host every command is aimed at (`--host`); `None` is this machine.
    pub host: Option<String>,
    pool: Pool,
    /// Colour for stdout and for stderr (each decided for its own stream).
    pub out: Style,
    pub err: Style,
    /// Columns to fit tables into (`None`: no limit).
    pub width: Option<usize>,
}

/// How long a follow may try to reach the daemon again after its connection went.
pub const RECONNECT_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

impl Ctx {
    /// `load_hosts`: read the hosts' configuration (a host is needed). Otherwise none is read,
    /// so a broken `[hosts]` table never stops a command on this machine.
    pub fn new(
        socket: Option<PathBuf>,
        host: Option<String>,
        color: ColorChoice,
        load_hosts: bool,
    ) -> Result<Ctx, String> {
        let socket = socket
            .filter(|s| !s.as_os_str().is_empty())
            .unwrap_or_else(cuba_protocol::paths::socket_path);
        let host = host.filter(|h| !hosts::is_local(Some(h)));
        if let Some(group) = host.as_deref().filter(|h| hosts::is_group(h)) {
            return Err(format!(
                "--host {group:?} names several hosts; cubactl reaches one at a time \
                 (`cubactl ps --all-hosts` lists every host's processes; the MCP tools run and \
                 start take a group)"
            ));
        }
        let configured = match load_hosts || host.is_some() {
            true => hosts::load_env()?,
            false => Hosts::default(),
        };
        Ok(Ctx {
            pool: Pool::new(socket.clone(), configured),
            socket,
            host,
            out: Style::stdout(color),
            err: Style::stderr(color),
            width: term::width(),
        })
    }

    /// True when commands go to another machine's daemon.
    pub fn is_remote(&self) -> bool {
        self.host.is_some()
    }

    /// The host's name as listings show it (`local` for this machine).
    pub fn host_name(&self) -> &str {
        self.host.as_deref().unwrap_or(hosts::LOCAL)
    }

    /// The configured hosts (empty unless they were loaded).
    pub fn hosts(&self) -> &Hosts {
        self.pool.hosts()
    }

    /// How to type a cubactl command aimed at the same host, for hints.
    pub fn cubactl(&self) -> String {
        invocation(self.host.as_deref())
    }

    /// A connection to the daemon of the host the command is aimed at: on this machine
    /// starting it when none runs; on another through its bridge (which starts one there).
    /// A connection reset while it is being made (the daemon re-executing itself in place
    /// closes every connection, one in its handshake too) is tried again, bounded as `once`.
    pub async fn connect(&self) -> Result<Client> {
        let host = self.host.as_deref();
        let mut attempt = 0;
        let made = loop {
            match self.connect_to(host).await {
                Err(e) if e.connection_lost() && attempt < RETRIES => {
                    attempt += 1;
                    self.forget().await;
                    tokio::time::sleep(Duration::from_millis(10 << attempt)).await;
                }
                made => break made,
            }
        };
        match made {
            Ok(c) => Ok(c),
            // These already name the host and say what to do.
            Err(e @ (ClientError::Bridge { .. } | ClientError::Host(_))) => Err(e.into()),
            Err(e) => Err(e).with_context(|| match host {
                Some(h) => format!("cannot talk to cubad on host {h}"),
                None => "cannot talk to cubad".to_string(),
            }),
        }
    }

    /// A connection to `host`'s daemon (`None`: this machine), kept for the next call.
    pub async fn connect_to(&self, host: Option<&str>) -> Result<Client, ClientError> {
        self.pool.client(host, me).await
    }

    /// Forgets the connection to the host the command is aimed at (its daemon went away).
    pub async fn forget(&self) {
        self.pool.forget(self.host.as_deref()).await;
    }

    /// A new connection after `lost` (an in-place upgrade or restart closes every connection
    /// and takes well under a second), tried for up to [`RECONNECT_WITHIN`].
    pub async fn reconnect(&self, lost: ClientError) -> Result<Client> {
        let deadline = tokio::time::Instant::now() + RECONNECT_WITHIN;
        let mut last = lost;
        while tokio::time::Instant::now() < deadline {
            self.forget().await;
            match self.connect_to(self.host.as_deref()).await {
                Ok(c) => return Ok(c),
                Err(e) if e.connection_lost() => last = e,
                Err(e) => return Err(e.into()),
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Err(last.into())
    }

    /// Sends a request carrying a request token (a spawn, a stdin write) with `f`; if the
    /// connection is lost before the answer (the daemon restarted, a bridge dropped), connects
    /// again (starting the daemon) and sends the same request: the daemon carries it out once
    /// and answers a repeat with the first attempt's result. Bounded: [`RETRIES`] attempts,
    /// about 2.5 s of pauses. Returns the connection that answered, for the calls that follow.
    pub async fn once<T, F, Fut>(&self, f: F) -> Result<(Client, T)>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let mut attempt = 0;
        loop {
            let e = match self.connect_to(self.host.as_deref()).await {
                Ok(c) => match f(c.clone()).await {
                    Ok(value) => return Ok((c, value)),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if attempt >= RETRIES || !e.connection_lost() {
                return Err(e.into());
            }
            attempt += 1;
            self.forget().await;
            tokio::time::sleep(Duration::from_millis(10 << attempt)).await;
        }
    }

    /// A connection to this machine's daemon if one already runs (for `daemon status`,
    /// `stop`).
    pub async fn connect_existing(&self) -> Result<Client, ClientError> {
        Client::connect(&self.socket, me()).await
    }
}

/// `cubactl`, or `cubactl --host NAME` for another host.
pub fn invocation(host: Option<&str>) -> String {
    match host.filter(|h| !hosts::is_local(Some(h))) {
        Some(h) => format!("cubactl --host {h}"),
        None => "cubactl".to_string(),
    }
}

fn me() -> cuba_protocol::ClientInfo {
    this_client(ClientKind::Cli, "cubactl")
}
