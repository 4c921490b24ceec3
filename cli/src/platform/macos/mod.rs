//! The macOS implementation of the platform interface: `sysctl` and `libproc` for processes
//! and ports, kqueue for exits (`EVFILT_PROC`) and file changes (`EVFILT_VNODE`).

pub mod exit;
pub mod ports;
pub mod procs;
mod sys;
pub mod watch;
