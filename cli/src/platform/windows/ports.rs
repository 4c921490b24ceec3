//! Not implemented on Windows: no process's listening ports are found, so `ps` shows none.
//! (The system's table is `GetExtendedTcpTable`, by owning pid; it is not read here yet.)

use std::net::SocketAddr;

/// None: see the module's doc.
pub fn listening(_pids: &[i32]) -> Vec<SocketAddr> {
    Vec::new()
}

/// None: see the module's doc.
pub fn holders(_port: u16) -> Vec<(SocketAddr, Option<i32>)> {
    Vec::new()
}
