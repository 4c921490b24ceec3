//! `cubad`, the supervisor: it alone spawns and owns every process that cuba-exec runs, keeps
//! their output, enforces limits, and serves the shared table on a Unix socket.
//!
//! Request path: `server` accepts and checks the peer's uid → `conn` does the handshake, builds
//! the connection's `caller`, and runs each request in its own task → `handlers` (one file per
//! request) read the `table`, or start processes through `session` and `launch` → a per-process
//! `supervise` task owns the child, its pipes and timers, and publishes every change on the
//! record's watch channel. Dependencies run one way: handlers → session → launch → supervise →
//! table / record → leaves (output, terminal, tree, reaper, journal, audit, config, policy,
//! platform). ARCHITECTURE.md draws it.

//!
//! Every OS runs this one request path; what differs lives under `platform/` (the transport,
//! a tree's handle, signals, process facts, the terminal), and what an OS cannot do is
//! refused from one table (`platform::capability`).

#![warn(clippy::unwrap_used)]

mod admission;
mod asks;
mod audit;
mod bearer;
mod blocking;
mod caller;
pub mod config;
mod conn;
pub mod cpu_rate;
mod daemon;
#[cfg(target_os = "linux")]
mod exec_rules;
#[cfg(unix)]
mod fd;
mod genuine;
mod handlers;
#[cfg(unix)]
pub mod handover;
pub mod health;
mod journal;
mod launch;
mod new_program;
mod new_record;
pub mod output;
mod person_file;
pub mod platform;
pub mod policy;
pub mod private_dir;
#[cfg(unix)]
mod reaper;
#[cfg(windows)]
#[path = "platform/windows/reaper.rs"]
mod reaper;
mod record;
mod restore;
pub mod server;
#[cfg(unix)]
mod session;
#[cfg(windows)]
#[path = "session/unsupported.rs"]
mod session;
mod side_effects;
mod state_dir;
mod supervise;
mod table;
mod takeover;
mod terminal;
mod tokens;
pub mod tree;

pub use config::Config;
pub use server::run;
