//! A process's parts, below its record: its output (memory, spool), its terminal, its tree
//! and the reaper that collects its exit, its CPU rate, and the rules its execs are checked
//! against, and the Unix socket rule of a sandboxed tree.

pub mod cpu_rate;
#[cfg(target_os = "linux")]
pub(crate) mod exec_rules;
// The proxy of `network = "proxy"` serves a network namespace per tree: Linux only.
#[cfg(target_os = "linux")]
pub mod net_proxy;
pub mod output;
#[cfg(unix)]
pub(crate) mod reaper;
#[cfg(windows)]
#[path = "../platform/windows/reaper.rs"]
pub(crate) mod reaper;
pub(crate) mod terminal;
pub mod tree;
#[cfg(unix)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub mod unix_sockets;
