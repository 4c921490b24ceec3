//! When a process started, as its system counts it. Opaque: Linux counts clock ticks since
//! boot (`/proc/PID/stat`), macOS microseconds since the epoch (`proc_pidinfo`). With the pid it
//! names one process, so a reused pid is told apart; two are compared only when read on the
//! same machine, and a later start is the larger.

use serde::{Deserialize, Serialize};

/// A process's start; `StartTime::UNKNOWN` when it could not be read. On the wire (journal,
/// hand-over) as the plain number it wraps.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct StartTime(pub u64);

impl StartTime {
    pub const UNKNOWN: StartTime = StartTime(0);
}
