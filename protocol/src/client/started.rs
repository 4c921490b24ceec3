//! The look a client's `start` takes at a new process before it says it runs: `cubactl start`
//! and MCP `start` alike.

use super::{Client, ClientError};
use crate::message::*;

/// How long a process that printed something within the start grace is watched on for an end
/// (`CUBA_EXEC_START_SETTLE_MS`, default 500; 0 for none): a server that prints its banner and
/// fails a moment later (its port taken) is said to have failed, not to run. One that prints
/// nothing costs no more than the grace.
pub fn start_settle_ms() -> u64 {
    std::env::var("CUBA_EXEC_START_SETTLE_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(500)
}

impl Client {
    /// Watches new process `id` for an end that means it failed at once: for `grace_ms`
    /// ([`crate::start_grace_ms`]), and then, if it printed anything meanwhile, for
    /// [`start_settle_ms`] more. The last wait's result, with all output from the start (up to
    /// `max_bytes`): `Exited` if it ended meanwhile.
    pub async fn start_check(
        &self,
        id: u64,
        grace_ms: u64,
        max_bytes: u32,
    ) -> Result<WaitResult, ClientError> {
        let look = |ms| WaitRequest {
            id,
            since: Some(0),
            spec: WaitSpec::exit(ms, max_bytes),
        };
        let w = self.wait(look(grace_ms)).await?;
        let printed = w.process.stdout_bytes + w.process.stderr_bytes > 0;
        let settle = start_settle_ms();
        if w.reason != WaitReason::Timeout || !printed || settle == 0 {
            return Ok(w);
        }
        self.wait(look(settle)).await
    }
}
