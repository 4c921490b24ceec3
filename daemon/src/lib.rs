//! `cubad`, the supervisor: it alone spawns and owns every process that cuba-exec runs, keeps
//! their output, enforces limits, and serves the shared table on a Unix socket.
//!
//! Request path: `server` accepts and checks the peer's uid → `conn` does the handshake and runs
//! each request in its own task → `handlers` (or `spawn`) act on the `daemon` table → a
//! per-process `supervise` task owns the child, its pipes and timers, and publishes every change
//! on the process's watch channel.

#![warn(clippy::unwrap_used)]

mod audit;
pub mod config;
mod config_file;
mod conn;
pub mod daemon;
mod fd;
mod handlers;
mod journal;
mod limits;
pub mod output;
pub mod policy;
mod proc;
mod pty;
mod reaper;
mod restore;
pub mod sandbox;
pub mod server;
mod session;
mod side_effects;
mod spawn;
pub mod spool;
mod supervise;
pub mod tree;

pub use config::Config;
pub use server::run;
