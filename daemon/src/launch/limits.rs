//! The rlimits layer: applied to the new pid right after the spawn on Linux (see
//! docs/decisions.md for the moment the shell runs without them), or by the child before its
//! exec where the OS cannot limit another process (macOS). `pids_max` / `memory_max` are the
//! cgroup layer's (`cgroup.rs`).

use std::sync::Arc;

use super::error::{LaunchError, Stage};
use super::layer::Layer;
use crate::platform::limits::Limiter;

pub struct Limits {
    pub limiter: Arc<Limiter>,
}

impl Layer for Limits {
    fn before(&mut self, cmd: &mut crate::platform::spawn::Spawn) -> Result<(), LaunchError> {
        // Where the OS cannot limit another process (macOS), the child limits itself.
        self.limiter.install(cmd);
        Ok(())
    }

    fn after(&mut self, pid: i32) -> Result<(), LaunchError> {
        self.limiter
            .apply(pid)
            .map_err(|why| LaunchError::new(Stage::Limits, why))
    }
}
