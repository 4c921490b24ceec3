//! `cubad`, the supervisor: it alone spawns and owns every process that cuba-exec runs, keeps
//! their output, enforces limits, and serves the shared table on a Unix socket.
//!
//! Request path: `serving::server` accepts and checks the peer's uid → `serving::conn` does the
//! handshake, builds the connection's `state::caller`, and runs each request in its own task →
//! `serving::handlers` (one file per request) read the `state::table`, or start processes
//! through `processes::session` and `processes::launch` → a per-process
//! `processes::supervise` task owns the child, its pipes and timers, and publishes every change
//! on the record's watch channel. The source is grouped by purpose into floors that import
//! only those below: `serving` → `processes` → `state` → `parts` → `platform` → `base`.
//! ARCHITECTURE.md draws it.
//!
//! Every OS runs this one request path; what differs lives under `platform/` (the transport,
//! a tree's handle, signals, process facts, the terminal), and what an OS cannot do is
//! refused from one table (`platform::capability`).

#![warn(clippy::unwrap_used)]

mod base;
mod parts;
pub mod platform;
mod processes;
mod serving;
mod state;

pub use base::{config, health, policy};
pub use parts::{cpu_rate, output, tree};
#[cfg(unix)]
pub use serving::handover;
pub use serving::server;
pub use state::private_dir;

pub use config::Config;
pub use server::run;
