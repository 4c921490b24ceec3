//! The TCP ports a process tree listens on: on Linux its members' socket inodes matched
//! against the LISTEN rows of `/proc/PID/net/tcp{,6}` (read by `cuba_protocol::ports`, which
//! `cubactl ps` uses too). Other OSes report none: the daemon logs no `PortOpened` there.

/// Whether this OS reports listening ports at all.
pub const REPORTED: bool = cfg!(target_os = "linux");

/// The ports `pids` (one tree, its root first: its network namespace is the one read) listen
/// on, each once.
#[cfg(target_os = "linux")]
pub fn listening(pids: &[i32]) -> Vec<u16> {
    let mut ports: Vec<u16> = cuba_protocol::ports::listening(pids)
        .iter()
        .map(|a| a.port())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[cfg(not(target_os = "linux"))]
pub fn listening(_pids: &[i32]) -> Vec<u16> {
    Vec::new()
}

/// Who listens on `port` in the daemon's network namespace, with the holder's pid where it is
/// readable.
#[cfg(target_os = "linux")]
pub fn holders(port: u16) -> Vec<(std::net::SocketAddr, Option<i32>)> {
    cuba_protocol::ports::holders(port)
}

#[cfg(not(target_os = "linux"))]
pub fn holders(_port: u16) -> Vec<(std::net::SocketAddr, Option<i32>)> {
    Vec::new()
}

/// The first port of the range the system draws outgoing connections' ports from: Linux's
/// `ip_local_port_range`; elsewhere the IANA range macOS and Windows use.
#[cfg(target_os = "linux")]
pub fn ephemeral_start() -> u16 {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range");
    let first = text
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok());
    first.unwrap_or(32768)
}

#[cfg(not(target_os = "linux"))]
pub fn ephemeral_start() -> u16 {
    49152
}
