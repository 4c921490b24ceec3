//! The daemon's state as request handlers see it: its settings, the process table, the launcher
//! and the sessions, the genuine programs a password may go to, and the connection count and
//! shutdown signal. Fields are private; the table behind it has its own small API (`table.rs`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use cuba_protocol::now_ms;
use tokio_util::sync::CancellationToken;

use crate::base::config::Config;
use crate::processes::launch::Launcher;
use crate::processes::session::Sessions;
use crate::serving::new_program::Accepted;
use crate::state::table::Table;
use crate::state::tokens::Tokens;

pub struct Daemon {
    config: Config,
    pid: u32,
    started_at_ms: u64,
    table: Arc<Table>,
    launcher: Launcher,
    sessions: Sessions,
    clients: AtomicU32,
    shutdown: CancellationToken,
    upgrade: Upgrades,
    bearer: Arc<crate::serving::bearer::Bearer>,
    genuine: crate::state::genuine::Genuine,
}

/// In-place upgrades: how many this pid went through, the one asked for now, the last failure.
#[derive(Default)]
struct Upgrades {
    count: u32,
    at_ms: Option<u64>,
    /// The program to hand over to, set by an `Upgrade` request for the server loop.
    wanted: Mutex<Option<Accepted>>,
    asked: tokio::sync::Notify,
    failed: Mutex<Option<String>>,
}

impl Daemon {
    pub fn new(config: Config, launcher: Launcher) -> Daemon {
        // Found once: what a password may go to does not change with what runs later.
        let genuine =
            crate::state::genuine::Genuine::find(&config.exe, std::env::var_os("PATH").as_deref());
        tracing::info!("askpass: {}", genuine.describe());
        let bearer = Arc::new(crate::serving::bearer::Bearer::new(
            config.tokens_file.clone(),
        ));
        // A token's budget holds what its callers start.
        let tokens = bearer.clone();
        launcher
            .budgets()
            .set_tokens(Box::new(move |name| tokens.budget_of(name)));
        Daemon {
            genuine,
            bearer,
            config,
            pid: std::process::id(),
            started_at_ms: now_ms(),
            table: launcher.table().clone(),
            sessions: Sessions::new(launcher.clone()),
            launcher,
            clients: AtomicU32::new(0),
            shutdown: CancellationToken::new(),
            upgrade: Upgrades::default(),
        }
    }

    /// This program took over from an earlier one of the same pid (started at
    /// `started_at_ms`, `count` upgrades ago in all).
    #[cfg(unix)]
    pub fn upgraded(mut self, started_at_ms: u64, count: u32) -> Daemon {
        self.started_at_ms = started_at_ms;
        self.upgrade.count = count;
        self.upgrade.at_ms = Some(now_ms());
        self
    }

    /// `(first start, upgrades so far)`.
    pub fn upgrades(&self) -> (u64, u32) {
        (self.started_at_ms, self.upgrade.count)
    }

    pub fn upgraded_at_ms(&self) -> Option<u64> {
        self.upgrade.at_ms
    }

    /// Asks the server loop to hand over to `binary` (accepted already).
    #[cfg(unix)]
    pub fn ask_upgrade(&self, binary: Accepted) {
        *lock(&self.upgrade.failed) = None;
        *lock(&self.upgrade.wanted) = Some(binary);
        self.upgrade.asked.notify_one();
    }

    /// Resolves when an upgrade was asked for: the binary to hand over to.
    pub async fn upgrade_asked(&self) -> Accepted {
        loop {
            if let Some(binary) = lock(&self.upgrade.wanted).take() {
                return binary;
            }
            self.upgrade.asked.notified().await;
        }
    }

    /// Why the last upgrade did not happen (shown in the daemon's status until one succeeds).
    pub fn upgrade_failed(&self, why: String) {
        *lock(&self.upgrade.failed) = Some(why);
    }

    pub fn upgrade_failure(&self) -> Option<String> {
        lock(&self.upgrade.failed).clone()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The genuine programs a password may go to (`AskSecret`).
    pub fn genuine(&self) -> &crate::state::genuine::Genuine {
        &self.genuine
    }

    /// The HTTP endpoint's bearer tokens.
    pub fn bearer(&self) -> &crate::serving::bearer::Bearer {
        &self.bearer
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

    /// Questions put to the person.
    pub fn asks(&self) -> &std::sync::Arc<crate::state::asks::Asks> {
        self.launcher.asks()
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
