//! Serving clients: the socket and its connections (`server`, `conn`), the daemon's services
//! in one place (`daemon`), one handler per request (`handlers`), tokens over HTTP (`bearer`),
//! and in-place upgrades (`new_program`, `handover`, `takeover`).

pub(crate) mod bearer;
pub(crate) mod conn;
pub(crate) mod daemon;
pub(crate) mod handlers;
#[cfg(unix)]
pub mod handover;
pub(crate) mod new_program;
pub mod server;
pub(crate) mod takeover;
