//! Wall-clock time as the table keeps it: Unix milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long a client's `start` watches a new process for an exit that means it failed at once
/// (`CUBA_EXEC_START_GRACE_MS`, default 100; 0 for none): `cubactl start` and MCP `start` alike.
pub fn start_grace_ms() -> u64 {
    std::env::var("CUBA_EXEC_START_GRACE_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(100)
}
