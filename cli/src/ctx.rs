//! What every subcommand gets: where the daemon is, how to style output, and a connection.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cuba_protocol::client::{this_client, Client};
use cuba_protocol::ClientKind;

use crate::style::{ColorChoice, Style};
use crate::term;

pub struct Ctx {
    pub socket: PathBuf,
    /// Colour for stdout and for stderr (each decided for its own stream).
    pub out: Style,
    pub err: Style,
    /// Columns to fit tables into (`None`: no limit).
    pub width: Option<usize>,
}

impl Ctx {
    pub fn new(socket: Option<PathBuf>, color: ColorChoice) -> Ctx {
        Ctx {
            socket: socket
                .filter(|s| !s.as_os_str().is_empty())
                .unwrap_or_else(cuba_protocol::paths::socket_path),
            out: Style::stdout(color),
            err: Style::stderr(color),
            width: term::width(),
        }
    }

    /// A connection to the daemon, starting it when none runs.
    pub async fn connect(&self) -> Result<Client> {
        Client::connect_or_start(&self.socket, me())
            .await
            .context("cannot talk to cubad")
    }

    /// A connection to a daemon that already runs (for `daemon status`, `stop`).
    pub async fn connect_existing(&self) -> Result<Client, cuba_protocol::client::ClientError> {
        Client::connect(&self.socket, me()).await
    }
}

fn me() -> cuba_protocol::ClientInfo {
    this_client(ClientKind::Cli, "cubactl")
}
