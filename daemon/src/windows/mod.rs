//! The daemon on Windows: one user's named pipe, each command's tree in a Job Object, output
//! drained into the same head+tail buffers and spool as on Unix.
//!
//! Request path: `server` accepts a pipe client and checks its user → `conn` does the version
//! handshake and runs each request in its own task → `handlers` read the `table` or start a
//! process through `launch`, whose threads drain its pipes and wait for its exit and publish
//! every change on the record's watch channel (`table::Rec`). What the Unix daemon does that
//! this one does not yet (terminals, sessions, hand-over, the journal, asks) is refused with a
//! message naming it (docs/decisions.md, "Windows").

// The crate allows both on Windows for its portable parts not used there yet; not here.
#![warn(dead_code, unused_imports)]

mod client;
mod conn;
mod console;
mod handlers;
mod input;
mod launch;
mod lock;
mod pipes;
mod plan;
mod server;
mod status;
mod stop;
mod table;
mod threads;
mod tty;
mod wait;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use cuba_protocol::now_ms;
use tokio::sync::watch;

use crate::config::Config;
use crate::state_dir::StateDir;
use table::Table;

pub use lock::{take as take_lock, Taken};

/// What every connection shares.
pub struct Daemon {
    config: Config,
    state: StateDir,
    table: Table,
    started_at_ms: u64,
    clients: AtomicU32,
    /// Set once to stop serving.
    stop: watch::Sender<bool>,
}

impl Daemon {
    fn new(config: Config) -> Daemon {
        Daemon {
            state: StateDir::new(config.state_dir.clone()),
            table: Table::default(),
            started_at_ms: now_ms(),
            clients: AtomicU32::new(0),
            stop: watch::Sender::new(false),
            config,
        }
    }

    fn pid() -> u32 {
        std::process::id()
    }

    fn clients(&self) -> u32 {
        self.clients.load(Ordering::Relaxed)
    }

    fn shutting_down(&self) -> bool {
        *self.stop.borrow()
    }
}

/// The shell commands run with when none is set: PowerShell 7, else Windows PowerShell, else
/// `cmd.exe`, whichever is on `PATH` (under Wine, whose PowerShell is a stub, `cmd.exe`).
pub fn default_shell() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    // Wine's powershell.exe is a stub that runs nothing.
    let wine = cuba_protocol::win::wine().is_some();
    let on_path = |exe: &str| {
        !(wine && exe.starts_with("powershell"))
            && std::env::split_paths(&path).any(|dir| dir.join(exe).is_file())
    };
    crate::platform::win_shell::default_shell(on_path).to_string()
}

/// Serves the user's pipe until a client asks the daemon to stop; every tree still running is
/// ended then (and with the daemon in any case: each job is killed when its handle closes).
pub async fn run(config: Config) -> Result<()> {
    console::ignore_ctrl_c();
    let d = Arc::new(Daemon::new(config));
    let pipe = d.config.socket.clone();
    let first = cuba_protocol::win::pipe_server(&pipe, true)
        .with_context(|| format!("cannot create the pipe {}", pipe.display()))?;
    tracing::info!(pipe = %pipe.display(), pid = Daemon::pid(), "cubad serving");
    server::serve(d.clone(), first).await;
    handlers::end_all(&d).await;
    tracing::info!("cubad stopped");
    Ok(())
}
