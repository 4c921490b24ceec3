//! The spawn between the layers: every layer's part before it, the child's stdio (pipes or a
//! terminal), the reaper's spawn, every layer's part after it; a child that did not get all of
//! it is killed.

use super::error::{LaunchError, Stage};
use super::layer::Layer;
use super::{pipes, terminal, Connected, Launcher};
use crate::platform::spawn::Spawn;

impl Launcher {
    /// The spawn between the layers: the child's ends, pid and start time.
    pub(super) fn spawn(
        &self,
        mut cmd: Spawn,
        layers: &mut [Box<dyn Layer>],
        terminal: Option<terminal::Terminal>,
        (shell, sandboxed): (&str, bool),
    ) -> Result<(Connected, i32, crate::platform::StartTime), LaunchError> {
        for layer in layers.iter_mut() {
            layer.before(&mut cmd)?;
        }
        let pipes = match &terminal {
            Some(t) => {
                t.before(&mut cmd)?;
                None
            }
            None => Some(pipes::before(&mut cmd)?),
        };
        let spawned = self.reaper.spawn(cmd);
        let (pid, exit, start_time) = spawned.map_err(|e| {
            let why = match sandboxed {
                true => format!("cannot run {shell} in the sandbox: {e}"),
                false => format!("cannot run {shell}: {e}"),
            };
            LaunchError::os(Stage::Spawn, why, e)
        })?;
        let connected = layers
            .iter_mut()
            .try_for_each(|layer| layer.after(pid))
            .and_then(|()| match (terminal, pipes) {
                (Some(t), _) => Ok(t.connect(exit)),
                (None, Some(pipes)) => pipes::connect(pipes, exit),
                (None, None) => Err(LaunchError::new(Stage::Pipes, "child has no pipes")),
            });
        match connected {
            Ok(connected) => Ok((connected, pid, start_time)),
            Err(e) => {
                // It must not run without what the layers give it; the reaper collects it.
                crate::platform::signal::kill_child(pid);
                Err(e)
            }
        }
    }
}
