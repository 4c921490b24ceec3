//! A process as people name it on the command line: its id, or its name.

use std::str::FromStr;

use anyhow::{bail, Result};
use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{ErrorKind, ListRequest, ProtocolError};

/// `3` or `web`. A name means the running process of that name, else the latest one.
#[derive(Clone, Debug)]
pub enum Target {
    Id(u64),
    Name(String),
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err("give a process id or name".into());
        }
        Ok(s.parse()
            .map_or_else(|_| Target::Name(s.to_string()), Target::Id))
    }
}

impl Target {
    pub async fn resolve(&self, client: &Client) -> Result<u64> {
        let name = match self {
            Target::Id(id) => return Ok(*id),
            Target::Name(n) => n,
        };
        let named: Vec<_> = client
            .list(ListRequest::default())
            .await?
            .into_iter()
            .filter(|p| p.name.as_deref() == Some(name.as_str()))
            .collect();
        let running: Vec<u64> = named
            .iter()
            .filter(|p| !p.state.is_finished())
            .map(|p| p.id)
            .collect();
        match (running.as_slice(), named.last()) {
            ([one], _) => Ok(*one),
            ([], Some(latest)) => Ok(latest.id),
            // Worded and coded as the daemon's unknown id, with the same hint.
            ([], None) => Err(ClientError::Remote(ProtocolError::new(
                ErrorKind::NotFound,
                format!("no process is named {name:?}"),
            ))
            .into()),
            (many, _) => bail!(
                "{} running processes are named {name:?} (ids {}); give an id",
                many.len(),
                many.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}
