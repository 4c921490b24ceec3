//! The optional OS sandbox (opt-in per daemon, `config::Sandbox`) on macOS: Seatbelt. The
//! command runs as `/usr/bin/sandbox-exec -p PROFILE SHELL ARGS…`: `sandbox-exec` enters the
//! profile and execs the shell in the same process (same pid, same start time), and the
//! profile binds every descendant.
//!
//! - `sandbox = "workspace-write"`: writes only under the allowed roots (or, when none are
//!   configured, the command's own cwd), the temp dirs (`/private/tmp`, `/private/var/folders`,
//!   the daemon's `$TMPDIR`), and the terminals, `/dev/fd` and the null devices; reading is not
//!   restricted.
//! - `network = false`: no network, but Unix sockets (as a Linux network namespace leaves path
//!   sockets reachable).
//!
//! The profile is text built in the daemon (`seatbelt.rs`); nothing runs in the child between
//! fork and exec, so std keeps its posix_spawn path. A daemon without `sandbox-exec` refuses to
//! start ([`probe`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::super::seatbelt;
use crate::base::config::Sandbox;
use crate::platform::spawn::Spawn;

const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Temp dirs every sandboxed command may write: `/tmp` resolves here, and per-user `$TMPDIR`s
/// and caches live under `/private/var/folders`.
const TEMP_DIRS: [&str; 2] = ["/private/tmp", "/private/var/folders"];

/// Builds, in the daemon, the profile the command runs under. `roots` are the allowed dirs.
pub fn prepare(sandbox: &Sandbox, roots: &[PathBuf], cwd: &Path) -> Result<Prepared> {
    let writable: Option<Vec<PathBuf>> = sandbox.workspace_write.then(|| {
        let mut paths: Vec<PathBuf> = sandbox
            .writable(roots, cwd)
            .iter()
            .filter(|p| !p.starts_with("/dev"))
            .map(|p| real(p))
            .collect();
        paths.extend(TEMP_DIRS.iter().map(PathBuf::from));
        paths
    });
    Ok(Prepared {
        profile: seatbelt::profile(
            writable.as_deref(),
            !sandbox.no_network,
            &sandbox.masks().iter().map(|m| real(m)).collect::<Vec<_>>(),
        ),
    })
}

/// `path` with its symbolic links resolved (Seatbelt matches the real path: `/tmp` is
/// `/private/tmp`); as given when it does not exist.
fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The sandbox of one spawn: its Seatbelt profile.
#[derive(Debug)]
pub struct Prepared {
    profile: String,
}

impl Prepared {
    /// The command that runs `program` in the sandbox: `sandbox-exec -p PROFILE program`
    /// (arguments added to it go to `program`).
    pub fn command(&self, program: &str) -> Spawn {
        let mut cmd = Spawn::new(SANDBOX_EXEC);
        cmd.arg("-p").arg(&self.profile).arg(program);
        cmd
    }

    /// Nothing to add in the child: `sandbox-exec` (from [`Prepared::command`]) enters the
    /// profile.
    pub fn install(&self, _cmd: &mut Spawn) {}
}

/// At start-up, before the daemon serves: runs `shell -c :` once through the sandbox, so a
/// sandbox the system cannot provide stops the daemon here with a clear error instead of
/// failing at every spawn. Call it before the reaper exists (it waits for its own child).
pub fn probe(sandbox: &Sandbox, roots: &[PathBuf], shell: &str, dir: &Path) -> Result<()> {
    if !sandbox.active() {
        return Ok(());
    }
    let what = sandbox.described();
    if !Path::new(SANDBOX_EXEC).is_file() {
        bail!(
            "{what} needs {SANDBOX_EXEC} (Seatbelt), which is missing; unset \
             CUBA_EXEC_SANDBOX / the `sandbox` key to run without confinement"
        );
    }
    let prepared =
        prepare(sandbox, roots, dir).with_context(|| format!("{what}: cannot prepare"))?;
    let mut cmd = prepared.command(shell);
    cmd.arg("-c")
        .arg(":")
        .current_dir(Path::new("/"))
        .group(crate::platform::spawn::Group::Own);
    prepared.install(&mut cmd);
    let status = cmd.status().with_context(|| {
        format!(
            "{what}: a test command could not run under {SANDBOX_EXEC}; unset it to run without"
        )
    })?;
    if !status.success() {
        bail!("{what}: the test command `{shell} -c :` failed in the sandbox ({status})");
    }
    tracing::info!(
        writable = ?sandbox.writable(roots, Path::new("<cwd>")),
        no_network = sandbox.no_network,
        "sandbox on (Seatbelt)"
    );
    Ok(())
}
