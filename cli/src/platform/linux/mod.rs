//! The Linux implementation of the platform interface: `/proc` for processes and ports, a
//! pidfd for exits, inotify for file changes.

pub mod exit;
pub mod ports;
pub mod procs;
pub mod watch;
