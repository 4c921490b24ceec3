//! The user's named pipe: one instance waits for a client; once one connects, the next is
//! made. The pipe's access list lets only this user in (`cuba_protocol::win`), and the client's
//! token user is checked all the same, as the peer's uid is on Unix.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cuba_protocol::win;
use tokio::net::windows::named_pipe::NamedPipeServer;

use super::{Check, Peer};
use crate::base::admission::Burst;

pub type Raw = NamedPipeServer;
pub type Stream = NamedPipeServer;
/// The user's lock file, held for the daemon's life (`main_windows.rs`).
pub type Lock = ();

pub fn stream(raw: Raw) -> std::io::Result<Stream> {
    Ok(raw)
}

pub struct Listener {
    name: PathBuf,
    waiting: NamedPipeServer,
    /// Failures to make the next instance, logged once a second at most.
    failures: Burst,
}

impl Listener {
    /// Serves `name`, whose first instance is `first`.
    pub fn new(name: PathBuf, first: NamedPipeServer) -> Listener {
        Listener {
            name,
            waiting: first,
            failures: Burst::new(Duration::from_secs(1)),
        }
    }

    /// The next client and the system's word on its user. Cancel-safe: a client that
    /// connects to the waiting instance meanwhile is served by the next call.
    pub async fn accept(&mut self) -> (Raw, Check) {
        if let Err(e) = self.waiting.connect().await {
            tracing::warn!("pipe client lost before it was served: {e}");
        }
        // A client that comes meanwhile finds the name busy and retries
        // (`win::open_pipe`).
        let next = loop {
            match win::pipe_server(&self.name, false) {
                Ok(next) => break next,
                Err(e) => {
                    // Keep serving the connections we have.
                    if let Some(n) = self.failures.note(Instant::now()) {
                        tracing::error!(
                            "cannot create the next pipe instance: {e} ({n} times since the \
                             last report)"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        let pipe = std::mem::replace(&mut self.waiting, next);
        let check = match win::check_client(&pipe) {
            Ok(pid) => Check::Ours(Peer {
                uid: 0,
                pid: i32::try_from(pid).ok(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Check::Foreign {
                peer: Peer { uid: 0, pid: None },
                why: format!("permission denied: {e}"),
            },
            Err(e) => Check::Unreadable(e),
        };
        (pipe, check)
    }
}
