//! The sandbox layer: the child enters its confinement (Landlock write rules, a network
//! namespace) in a hook prepared in the daemon and run in the child before its exec.

use super::error::{LaunchError, Stage};
use super::layer::Layer;
use super::plan::Confinement;
use crate::platform::sandbox::{self, Prepared};
use crate::platform::spawn::Spawn;

pub struct Sandbox {
    /// Alive until the spawn has returned: the child enters its ruleset.
    prepared: Option<Prepared>,
}

impl Sandbox {
    /// The layer for `confinement`, when it confines anything; `cwd` is where a command with
    /// no allowed roots may write.
    pub fn of(
        confinement: &Confinement,
        cwd: &std::path::Path,
    ) -> Result<Option<Sandbox>, LaunchError> {
        if !confinement.sandbox.active() {
            return Ok(None);
        }
        let prepared =
            sandbox::prepare(&confinement.sandbox, &confinement.roots, cwd).map_err(|e| {
                LaunchError::new(Stage::Sandbox, format!("cannot prepare the sandbox: {e:#}"))
            })?;
        Ok(Some(Sandbox {
            prepared: Some(prepared),
        }))
    }

    /// The command that runs `program` in this sandbox (on macOS, under `sandbox-exec`).
    pub fn command(&self, program: &str) -> Spawn {
        match &self.prepared {
            Some(p) => p.command(program),
            None => Spawn::new(program),
        }
    }
}

impl Layer for Sandbox {
    fn before(&mut self, cmd: &mut Spawn) -> Result<(), LaunchError> {
        if let Some(p) = &self.prepared {
            p.install(cmd);
        }
        Ok(())
    }

    fn after(&mut self, _pid: i32) -> Result<(), LaunchError> {
        self.prepared = None;
        Ok(())
    }
}
