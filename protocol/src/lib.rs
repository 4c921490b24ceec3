//! `cuba-protocol`: what `cubad`, `cuba-exec` and `cubactl` say to each other, and how.
//!
//! - [`message`]: the request and response types (data only).
//! - [`wire`]: the length-prefixed bincode encoding (the only place bincode is named).
//! - [`handshake`]: the fixed-layout version exchange that precedes everything else.
//! - [`paths`]: socket and state-directory discovery.
//! - [`client`]: an async client with request multiplexing and daemon auto-start.
//! - [`safe_fs`]: opening files in the daemon's directories without following links.
//! - [`quiet`]: a Unix stream watched for reading only (no wake-up per frame read).
//! - [`keys`] and [`signal`]: key and signal names as people and agents write them.
//! - [`os_text`]: paths and environments on the wire, the same bytes from every OS.
//! - [`private`]: each program keeps its memory and descriptors from the user's other processes.
//! - `ports` (Linux): the TCP ports a set of processes listens on.

#![warn(clippy::unwrap_used)]

pub mod client;
pub mod cmdline;
pub mod handshake;
pub mod hosts;
pub mod keys;
pub mod message;
pub mod os_text;
pub mod paths;
#[cfg(target_os = "linux")]
pub mod ports;
pub mod private;
pub mod procargs;
#[cfg(unix)]
pub mod quiet;
#[cfg(unix)]
pub mod safe_dir;
#[cfg(windows)]
#[path = "safe_dir_windows.rs"]
pub mod safe_dir;
pub mod safe_fs;
pub mod signal;
mod time;
pub mod tokens;
#[cfg(windows)]
pub mod win;
pub mod wire;

pub use message::*;
pub use time::{format_utc, format_utc_ms, now_ms, start_grace_ms};

/// Bumped on any change to the wire format or the message types.
pub const PROTOCOL_VERSION: u32 = 23;

/// The version of this build of the cuba-exec binaries.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
