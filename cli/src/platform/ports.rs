//! The TCP ports a set of processes listens on.
//!
//! The system provides (`os::ports`): `listening(pids) -> Vec<SocketAddr>`, in any order, and
//! `holders(port) -> Vec<(SocketAddr, Option<pid>)>`, every listener of a port machine-wide.

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

/// Who listens on `port` on this machine (ours or not), with the pid where it is readable.
pub fn holders(port: u16) -> Vec<(SocketAddr, Option<i32>)> {
    os::ports::holders(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Through the system's own tables, so it checks each system's implementation where it runs.
    #[test]
    #[cfg_attr(windows, ignore = "ports are not listed on Windows yet")]
    fn own_listener_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("local address");
        let me = std::process::id() as i32;
        assert!(listening(&[me]).contains(&addr), "{addr} not listed");
        drop(listener);
        assert!(!listening(&[me]).contains(&addr), "{addr} still listed");
    }
}
