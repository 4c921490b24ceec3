//! The TCP ports a set of processes listens on.
//!
//! The system provides (`os::ports`): `listening(pids) -> Vec<SocketAddr>`, in any order.

use std::net::SocketAddr;

use super::os;

/// The TCP sockets in LISTEN state among `pids`' open files, by port. `pids` is one process
/// tree, its root first (on Linux, the root's network namespace is the one read).
pub fn listening(pids: &[i32]) -> Vec<SocketAddr> {
    let mut out = os::ports::listening(pids);
    out.sort_unstable_by_key(|a| (a.port(), a.ip()));
    out.dedup();
    out
}
