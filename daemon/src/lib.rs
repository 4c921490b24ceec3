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
//! On Windows the request path is `windows/` (a named pipe, Job Objects, threads draining the
//! pipes) over the same portable parts: settings, policy, output buffers and spools, private
//! directories and the Windows platform pieces. The POSIX modules are not built there.

#![warn(clippy::unwrap_used)]
#![cfg_attr(windows, allow(dead_code, unused_imports))]

#[cfg(unix)]
mod admission;
#[cfg(unix)]
mod asks;
mod audit;
#[cfg(unix)]
mod bearer;
mod blocking;
#[cfg(unix)]
mod caller;
pub mod config;
#[cfg(unix)]
mod conn;
pub mod cpu_rate;
#[cfg(unix)]
mod daemon;
#[cfg(target_os = "linux")]
mod exec_rules;
#[cfg(unix)]
mod fd;
#[cfg(unix)]
mod genuine;
#[cfg(unix)]
mod handlers;
#[cfg(unix)]
pub mod handover;
pub mod health;
mod journal;
#[cfg(unix)]
mod launch;
#[cfg(unix)]
mod new_program;
mod new_record;
pub mod output;
#[cfg(unix)]
mod person_file;
pub mod platform;
pub mod policy;
pub mod private_dir;
#[cfg(unix)]
mod reaper;
#[cfg(unix)]
mod record;
#[cfg(unix)]
mod restore;
// The terminal's screen, without the POSIX terminal around it.
#[cfg(windows)]
#[path = "terminal/screen.rs"]
mod screen;
#[cfg(unix)]
pub mod server;
#[cfg(unix)]
mod session;
// Used by the Unix request path only so far.
#[cfg_attr(not(unix), allow(dead_code))]
mod side_effects;
mod state_dir;
#[cfg(unix)]
mod supervise;
#[cfg(unix)]
mod table;
#[cfg(unix)]
mod terminal;
mod tokens;
#[cfg(unix)]
pub mod tree;
#[cfg(windows)]
pub mod windows;

pub use config::Config;
#[cfg(unix)]
pub use server::run;
