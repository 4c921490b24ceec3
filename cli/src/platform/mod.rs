//! What cubactl asks of the operating system beyond POSIX, one module per concern. Each module
//! is the interface callers use, with the logic every system shares; `os` is this system's
//! implementation (`linux/`, `macos/`, `windows/`), which provides the same few items for each concern
//! (listed in the concern's module docs). Another system is a directory of its own plus its two
//! `cfg` lines below: no caller changes.
//!
//! - [`procs`]: every process at one moment (parent, CPU time, memory), trees, env markers.
//! - [`ports`]: the TCP ports a set of processes listens on.
//! - [`exit`]: waiting for a process to exit.
//! - [`watch`]: waking up when a followed file grows, moves or is replaced.

pub mod exit;
pub mod ports;
pub mod procs;
pub mod watch;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as os;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;

/// What the system says about one process at one moment. (Here rather than in `procs`: the
/// implementations fill it in, and they depend on nothing above them.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub ppid: i32,
    /// Exited, not yet reaped (Windows: exited, its process object still open): counts as
    /// gone.
    pub zombie: bool,
    /// User + system CPU time, in nanoseconds.
    pub cpu_ns: u64,
    /// Resident memory, in bytes.
    pub rss_bytes: u64,
}
