//! The rlimits layer: set by the child itself before its exec, so no instant of the command
//! runs without them. `pids_max` / `memory_max` are the cgroup layer's (`cgroup.rs`).

use std::sync::Arc;

use super::error::LaunchError;
use super::layer::Layer;
use crate::platform::limits::Limiter;

pub struct Limits {
    pub limiter: Arc<Limiter>,
}

impl Layer for Limits {
    fn before(&mut self, cmd: &mut crate::platform::spawn::Spawn) -> Result<(), LaunchError> {
        self.limiter.install(cmd);
        Ok(())
    }
}
