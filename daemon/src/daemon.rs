//! The daemon's state as request handlers see it: its settings, the process table, the launcher
//! and the sessions, and the connection count and shutdown signal. Fields are private; the
//! table behind it has its own small API (`table.rs`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use cuba_protocol::now_ms;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::launch::Launcher;
use crate::session::Sessions;
use crate::table::Table;
use crate::tokens::Tokens;

pub struct Daemon {
    config: Config,
    pid: u32,
    started_at_ms: u64,
    table: Arc<Table>,
    launcher: Launcher,
    sessions: Sessions,
    clients: AtomicU32,
    shutdown: CancellationToken,
}

impl Daemon {
    pub fn new(config: Config, launcher: Launcher) -> Daemon {
        Daemon {
            config,
            pid: std::process::id(),
            started_at_ms: now_ms(),
            table: launcher.table().clone(),
            sessions: Sessions::new(launcher.clone()),
            launcher,
            clients: AtomicU32::new(0),
            shutdown: CancellationToken::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn started_at_ms(&self) -> u64 {
        self.started_at_ms
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// The request tokens of spawn-like requests (kept by the table, with the records).
    pub fn tokens(&self) -> &Tokens {
        self.table.tokens()
    }

    pub fn launcher(&self) -> &Launcher {
        &self.launcher
    }

    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Connections that completed their handshake and are open now.
    pub fn clients(&self) -> u32 {
        self.clients.load(Ordering::Relaxed)
    }

    /// Counts a connection in while `f` serves it.
    pub async fn serving<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.clients.fetch_add(1, Ordering::Relaxed);
        let out = f.await;
        self.clients.fetch_sub(1, Ordering::Relaxed);
        out
    }

    /// Cancelled when the daemon starts going down (a signal, or a client's `Shutdown`).
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }
}
