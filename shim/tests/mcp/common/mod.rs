//! Shared helpers for the MCP tests: [`TestDir`], a test's private world (the end-to-end
//! suite's [`TestDaemon`]: a short temp dir, a `cubad` started here or by the shim, and a guard
//! whose `Drop` kills every daemon of it, the shims it was told about and every process they
//! started), bounded awaits, and the MCP client side in [`mcp`].
//!
//! Every await in these tests is bounded: a hung daemon or shim fails a test instead of
//! hanging the suite.

#![allow(dead_code, reason = "each test binary uses a subset of the helpers")]

pub mod hosts;
pub mod mcp;

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cuba_tests::TestDaemon;

/// How long one ordinary step (a tool call, a short process) may take before the test fails.
pub const STEP: Duration = Duration::from_secs(20);

/// Grace period (TERM → KILL) every daemon of these tests uses.
const GRACE: &str = "500ms";

/// Whether a process lives (from `/proc`), and SIGKILL.
#[allow(unused_imports)]
pub use cuba_tests::procfs::{kill9, pid_alive};
/// The end-to-end suite's bounded await and condition re-check (not every test file uses both).
#[allow(unused_imports)]
pub use cuba_tests::{bounded, wait_for};

/// The shim binary under test.
pub fn shim_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cuba-exec"))
}

/// A test's private world, with its paths as the MCP tests use them; everything else (the log,
/// markers, the daemons serving its socket, the environment of a shim) is the shared
/// [`TestDaemon`]'s, which it derefs to.
pub struct TestDir(TestDaemon);

impl TestDir {
    /// No daemon yet: the shim binary starts one from [`TestDaemon::client_env`].
    pub fn new() -> TestDir {
        TestDir(TestDaemon::builder().grace(GRACE).on_demand())
    }

    /// A dir with `cubad` already running on its socket (for in-process servers, which must not
    /// auto-start through process-global environment variables).
    pub async fn with_daemon() -> TestDir {
        Self::with_daemon_env(&[]).await
    }

    /// Like [`TestDir::with_daemon`], with `env` set for `cubad` (e.g. its limits).
    pub async fn with_daemon_env(env: &[(&str, &str)]) -> TestDir {
        TestDir(TestDaemon::builder().grace(GRACE).envs(env).start().await)
    }

    pub fn path(&self) -> &Path {
        self.0.dir()
    }

    pub fn socket(&self) -> PathBuf {
        self.0.socket().to_path_buf()
    }

    pub fn state(&self) -> PathBuf {
        self.0.state_dir().to_path_buf()
    }
}

impl Deref for TestDir {
    type Target = TestDaemon;

    fn deref(&self) -> &TestDaemon {
        &self.0
    }
}

impl DerefMut for TestDir {
    fn deref_mut(&mut self) -> &mut TestDaemon {
        &mut self.0
    }
}
