//! The resource-limits layer: rlimits and the per-process cgroup, applied to the new pid right
//! after the spawn on Linux (so the fast posix_spawn path stays; see docs/decisions.md for the
//! moment the shell runs unlimited), or by the child before its exec where the OS cannot limit
//! another process (macOS); the cgroup is removed when the process has ended.

use std::sync::Arc;

use super::layer::Layer;
use crate::platform::limits::Limiter;
use crate::supervise::Cleanup;

pub struct Limits {
    pub limiter: Arc<Limiter>,
    pub id: u64,
}

impl Layer for Limits {
    fn before(&mut self, cmd: &mut std::process::Command) -> Result<(), String> {
        // Where the OS cannot limit another process (macOS), the child limits itself.
        self.limiter.install(cmd);
        Ok(())
    }

    fn after(&mut self, pid: i32) -> Result<(), String> {
        self.limiter.apply(self.id, pid)
    }

    fn undo(&mut self) -> Option<Cleanup> {
        let (limiter, id) = (self.limiter.clone(), self.id);
        Some(Box::new(move || limiter.release(id)))
    }
}
