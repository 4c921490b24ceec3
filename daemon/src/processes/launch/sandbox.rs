//! The sandbox layer: the child enters its confinement (Landlock rules, a network namespace)
//! in a hook prepared in the daemon and run in the child before its exec; with
//! `network = "proxy"`, the daemon serves the proxy on the port the child opened in its
//! namespace until the process has ended.

use std::sync::Arc;

use super::error::{LaunchError, Stage};
use super::layer::Layer;
use super::plan::Confinement;
use crate::platform::sandbox::{self, Prepared};
use crate::platform::spawn::Spawn;
use crate::processes::supervise::Cleanup;

use super::NetProxy;

pub struct Sandbox {
    /// Alive until the spawn has returned: the child enters its ruleset.
    prepared: Option<Prepared>,
    /// The process's id and the proxy that serves its tree, for `network = "proxy"`.
    proxy: Option<(u64, Arc<NetProxy>)>,
    /// Stops serving the proxy once the process has ended.
    serving: Option<Cleanup>,
}

impl Sandbox {
    /// The layer for `confinement`, when it confines anything; `cwd` is where a command with
    /// no allowed roots may write.
    pub fn of(
        confinement: &Confinement,
        cwd: &std::path::Path,
        (id, proxy): (u64, Option<&Arc<NetProxy>>),
    ) -> Result<Option<Sandbox>, LaunchError> {
        if !confinement.sandbox.active() {
            return Ok(None);
        }
        let prepared =
            sandbox::prepare(&confinement.sandbox, &confinement.roots, cwd).map_err(|e| {
                LaunchError::new(Stage::Sandbox, format!("cannot prepare the sandbox: {e:#}"))
            })?;
        let proxy = match (confinement.sandbox.proxied(), proxy) {
            (Some(_), Some(p)) => Some((id, p.clone())),
            (Some(_), None) => {
                let why = "network = \"proxy\" is not available on this system";
                return Err(LaunchError::new(Stage::Sandbox, why));
            }
            _ => None,
        };
        Ok(Some(Sandbox {
            prepared: Some(prepared),
            proxy,
            serving: None,
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
        if let Some(p) = &mut self.prepared {
            p.install(cmd);
        }
        // The tools that honour the proxy variables find the proxy's port in the tree.
        #[cfg(target_os = "linux")]
        if self.proxy.is_some() {
            for (name, value) in crate::parts::net_proxy::env_vars(sandbox::PROXY_PORT) {
                cmd.add_env(&name, &value);
            }
        }
        Ok(())
    }

    fn after(&mut self, _pid: i32) -> Result<(), LaunchError> {
        let prepared = self.prepared.take();
        #[cfg(target_os = "linux")]
        if let (Some(mut prepared), Some((id, proxy))) = (prepared, self.proxy.take()) {
            let failed = |e: std::io::Error| {
                LaunchError::new(Stage::Sandbox, format!("cannot serve the proxy: {e}"))
            };
            let listener = prepared.proxy_listener().map_err(failed)?;
            if let Some(listener) = listener {
                self.serving = Some(proxy.serve(id, listener).map_err(failed)?);
            }
        }
        // Nothing to serve elsewhere: `of` refused a proxied tree.
        #[cfg(not(target_os = "linux"))]
        drop((prepared, self.proxy.take()));
        Ok(())
    }

    fn undo(&mut self) -> Option<Cleanup> {
        self.serving.take()
    }
}
