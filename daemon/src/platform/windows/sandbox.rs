//! The optional OS sandbox (`config::Sandbox`) on Windows: not available. Write confinement
//! and network isolation are Landlock and a network namespace on Linux, Seatbelt on macOS;
//! Windows has nothing a command can be put in as simply, so a daemon configured for either
//! refuses to start ([`probe`]) instead of running commands unconfined.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::base::config::Sandbox;

/// At start-up, before the daemon serves: `Ok` when no sandbox is configured; otherwise an
/// error naming what is set, so the daemon stops with it.
pub fn probe(sandbox: &Sandbox, _roots: &[PathBuf], _shell: &str, _dir: &Path) -> Result<()> {
    if !sandbox.active() {
        return Ok(());
    }
    let what = sandbox.described();
    let mut keys = Vec::new();
    if sandbox.workspace_write {
        keys.push("CUBA_EXEC_SANDBOX / the `sandbox` key");
    }
    if sandbox.no_network || sandbox.proxy.is_some() {
        keys.push("CUBA_EXEC_NETWORK / the `network` key");
    }
    if sandbox.masked && !sandbox.workspace_write {
        keys.push("CUBA_EXEC_DENY_READ / the `deny_read` key");
    }
    let unset = keys.join(" and ");
    bail!(
        "{what} needs the OS sandbox (Landlock and a network namespace on Linux, Seatbelt on \
         macOS), which is unavailable on Windows; unset {unset} to run without confinement"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_configured_sandbox_is_refused() {
        let dir = Path::new(".");
        assert!(probe(&Sandbox::default(), &[], "cmd.exe", dir).is_ok());
        let net = Sandbox {
            no_network: true,
            ..Sandbox::default()
        };
        let Err(e) = probe(&net, &[], "cmd.exe", dir) else {
            panic!("a sandbox must be refused")
        };
        assert!(e.to_string().starts_with("network = false needs"), "{e}");
    }
}
