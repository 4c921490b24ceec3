//! The Windows implementation of the platform interface: a Toolhelp snapshot for processes,
//! a process handle's wait for exits, and a timer for file changes. Ports are not listed.

pub mod exit;
pub mod ports;
pub mod procs;
pub mod watch;
