//! The cgroup layer: process `id` gets its own cgroup(s), made in the daemon before the spawn
//! and the child born in them (`platform::cgroup`, `spawn`), so nothing of its tree ever
//! runs outside. The record keeps the handle (stop, CPU and memory); the cgroup is given back
//! for a later process, or removed, once the process has ended and its output is in.

use std::sync::Arc;

use super::error::{LaunchError, Stage};
use super::layer::Layer;
use crate::base::blocking::off_runtime;
use crate::platform::cgroup::{AgentGroup, Cgroups, Placement, ProcCgroup};
use crate::platform::spawn::Spawn;
use crate::processes::supervise::Cleanup;

pub struct Cgroup {
    /// Open until the spawn has returned: the child writes to its `cgroup.procs`.
    placement: Option<Placement>,
    handle: Arc<ProcCgroup>,
}

impl Cgroup {
    /// `group`: the agent whose budget holds it.
    pub fn of(
        cgroups: &Cgroups,
        id: u64,
        group: Option<&Arc<AgentGroup>>,
    ) -> Result<Cgroup, LaunchError> {
        let placement = cgroups
            .prepare(id, group)
            .map_err(|e| LaunchError::os(Stage::Cgroup, e.to_string(), e))?;
        Ok(Cgroup {
            handle: placement.handle(),
            placement: Some(placement),
        })
    }

    pub fn handle(&self) -> Arc<ProcCgroup> {
        self.handle.clone()
    }
}

impl Layer for Cgroup {
    fn before(&mut self, cmd: &mut Spawn) -> Result<(), LaunchError> {
        if let Some(p) = &self.placement {
            p.install(cmd);
        }
        Ok(())
    }

    fn after(&mut self, _pid: i32) -> Result<(), LaunchError> {
        self.placement = None;
        Ok(())
    }

    fn undo(&mut self) -> Option<Cleanup> {
        let handle = self.handle.clone();
        Some(Box::new(move || {
            if !handle.give_back() {
                off_runtime(move || handle.release());
            }
        }))
    }
}
