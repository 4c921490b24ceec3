//! The one seam between the daemon and the operating system: every mechanism that exists on one
//! OS only lives below here, one module per concern, each with a small interface. The rest of
//! the daemon calls these modules and never reads `/proc`, opens a pidfd or names a raw system
//! call itself, so supporting another OS means adding an implementation here, not editing
//! callers.
//!
//! - [`proc`]: facts about processes (parent, group, start time, children, environment, cwd).
//! - [`signal`]: signalling one exact process (never a reused pid).
//! - [`input`]: whether a process is blocked reading a given pipe or terminal.
//! - [`process`]: the daemon's own set-up (detaching, subreaper, inherited descriptors,
//!   randomness).
//! - [`pipe`]: pipes for children (close-on-exec, larger buffers, identity).
//! - [`terminal`]: what a child needs to take a terminal as its controlling one.
//! - [`limits`]: per-process rlimits.
//! - [`spawn`]: what a child is started with, and its start; [`clone`] (Linux) is the
//!   vfork-style `clone3` start, into the child's cgroup.
//! - [`cgroup`]: a cgroup per process, entered before the exec: exact stop, CPU and memory,
//!   `pids_max` / `memory_max`, OOM kills (a stub reporting "unavailable" on macOS; a Job
//!   Object per command on Windows).
//! - [`sandbox`]: write confinement and network isolation (the command to run, and what the
//!   child does before its exec; refused at start-up on Windows).
//! - [`usage`]: the portable plain types: a tree's CPU and memory figures, a pooled cgroup's
//!   slot, how a process ended ([`Exit`]).
//! - [`descriptors`]: how many descriptors the daemon has open.
//! - [`memory`]: giving freed heap memory back to the kernel.
//! - [`transport`]: the clients' connections (a Unix socket; a named pipe on Windows) and the
//!   system's word on each peer.
//! - [`capability`]: what this OS's daemon offers, and the refusal of what it does not.
//! - [`ports`]: the TCP ports a tree listens on (Linux; none reported elsewhere).
//!
//! `linux/` and `macos/` implement every concern; `fallback/` has portable versions of
//! [`descriptors`] and [`memory`] for any other OS. `windows/` implements [`proc`], [`signal`],
//! [`limits`], [`cgroup`] and [`sandbox`] (and has its own Job Objects, pseudo consoles and
//! console events). `seatbelt` is macOS's pure profile text and `win_shell` / `win_signal`
//! Windows' command lines, environment and signal actions, compiled for tests everywhere so
//! they are checked on any machine (the `KERN_PROCARGS2` parser, shared with `cubactl`, is
//! `cuba_protocol::procargs`).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::{
    cgroup, clone, descriptors, exec_check, input, limits, memory, pipe, proc, process, sandbox,
    signal, terminal,
};

#[cfg(target_os = "macos")]
mod macos;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod posix;
#[cfg(any(target_os = "linux", target_os = "macos"))]
pub use posix::set_cloexec;
#[cfg(any(target_os = "linux", target_os = "macos"))]
pub mod spawn;
#[cfg(target_os = "macos")]
pub use macos::{
    cgroup, descriptors, input, limits, memory, pipe, proc, process, sandbox, signal, terminal,
};
pub mod capability;
pub mod ports;
#[cfg(any(test, target_os = "macos"))]
mod seatbelt;
mod start_time;
pub use start_time::StartTime;
pub mod transport;
pub mod usage;
pub use usage::Exit;

/// Command text as a POSIX shell's `-c` argument: a shell takes text that starts with `-` or
/// `+` for options of its own (`sh -c '-x y'`: "Illegal option"); led by a space, which every
/// shell skips, it is the command it is.
pub fn shell_command_text(text: &str) -> String {
    match text.starts_with(['-', '+']) {
        true => format!(" {text}"),
        false => text.to_string(),
    }
}

/// Where programs are looked for after `PATH` (a service's `PATH` may lack them).
#[cfg(unix)]
pub const SYSTEM_BIN_DIRS: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];
#[cfg(any(test, windows))]
pub mod win_shell;
#[cfg(any(test, windows))]
pub mod win_signal;

#[cfg(windows)]
pub mod windows;
#[cfg(windows)]
pub use windows::{cgroup, limits, proc, sandbox, signal};

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod fallback;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub use fallback::{descriptors, memory};
