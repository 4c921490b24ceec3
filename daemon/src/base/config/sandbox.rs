//! The OS sandbox settings (`sandbox`, `network`, the daemon's `TMPDIR`). How a command enters
//! it is the platform's (`platform::sandbox`).

use std::path::{Path, PathBuf};

/// Character devices (and the pty directory) a shell writes to; everything else in `/dev`
/// stays read-only.
const DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/pts"];

/// The sandbox settings of a daemon.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sandbox {
    /// `sandbox = "workspace-write"` (`CUBA_EXEC_SANDBOX`): Landlock write confinement.
    pub workspace_write: bool,
    /// `network = false` (`CUBA_EXEC_NETWORK=0`): a new network namespace per command.
    pub no_network: bool,
    /// The daemon's own `$TMPDIR` (never a client's: that would let a client pick a writable
    /// directory).
    pub tmpdir: Option<PathBuf>,
}

impl Sandbox {
    pub fn active(&self) -> bool {
        self.workspace_write || self.no_network
    }

    /// What a command may write under: `roots` (or `cwd` when there are none), the temp dirs
    /// and the devices.
    pub fn writable(&self, roots: &[PathBuf], cwd: &Path) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = if roots.is_empty() {
            vec![cwd.to_path_buf()]
        } else {
            roots.to_vec()
        };
        paths.push(PathBuf::from("/tmp"));
        paths.extend(self.tmpdir.iter().cloned());
        paths.extend(DEVICES.iter().map(PathBuf::from));
        paths
    }
}
