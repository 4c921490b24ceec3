//! One concern of starting a process. A launch runs every layer's [`Layer::before`] on the
//! command, spawns it, then every layer's [`Layer::after`] on the new pid, and hands what the
//! layers leave to undo to the supervisor (or undoes it at once when the launch failed). A new
//! concern (a cgroup, a hand-over) is a new layer, not an edit of the launch.

use super::error::LaunchError;
use crate::platform::spawn::Spawn;
use crate::processes::supervise::Cleanup;

pub trait Layer: Send {
    /// Before the spawn, in the daemon: arguments, descriptors, hooks run in the child.
    fn before(&mut self, _cmd: &mut Spawn) -> Result<(), LaunchError> {
        Ok(())
    }

    /// Right after the spawn, on the child's pid. An error kills the child: it must not run
    /// without what this layer gives it.
    fn after(&mut self, _pid: i32) -> Result<(), LaunchError> {
        Ok(())
    }

    /// What to undo once the process has ended (or at once if the launch failed).
    fn undo(&mut self) -> Option<Cleanup> {
        None
    }
}
