//! [`TestDaemon`]: one test's private daemon world, the one fixture of the end-to-end, MCP and
//! CLI tests. A short temp dir holds the socket (`s`), the state dir (`state`) and the daemon's
//! files (an empty config, approvals and tokens of its own, no notifications); the guard's
//! `Drop` kills every daemon that served the socket and every process they started (found by
//! their environment marker), and removes their cgroups.
//!
//! [`Builder::start`] runs `cubad` in the foreground and waits until it answers;
//! [`Builder::on_demand`] starts none, for a client given [`TestDaemon::client_env`] to start
//! it as `cubactl` and `cuba-exec` do when no daemon answers.

mod builder;
mod launch;
mod leftovers;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use cuba_protocol::client::{this_client, Client};
use cuba_protocol::ClientKind;
use tempfile::TempDir;

use crate::procfs;
pub use crate::small_state::SmallState;
pub use builder::Builder;

/// Grace period (TERM → KILL) the test daemons use unless a test sets another.
pub const TEST_GRACE: &str = "300ms";

/// A private `cubad` world owned by one test: the daemon the guard started, if any, and those
/// its clients start.
#[derive(Debug)]
pub struct TestDaemon {
    dir: TempDir,
    socket: PathBuf,
    state: PathBuf,
    env: Vec<(String, String)>,
    ignored: Vec<i32>,
    limits: builder::Limits,
    /// How the small state directory was made, if the test asked for one.
    small: Option<SmallState>,
    child: Option<Child>,
    /// Other processes of the test to SIGKILL with the daemon (e.g. a client it started).
    also_kill: Vec<i32>,
}

impl TestDaemon {
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A daemon with default settings (and the short test grace period).
    pub async fn start() -> TestDaemon {
        Builder::default().start().await
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    /// How the small state directory was made (`None`: the test asked for none).
    pub fn small_state(&self) -> Option<SmallState> {
        self.small
    }

    /// Where the daemon the guard starts writes its stderr: beside the state dir, or in a small
    /// one (so that it fills with everything else).
    fn log_path(&self) -> PathBuf {
        match self.small {
            Some(_) => self.state.join("cubad.log"),
            None => self.dir.path().join("cubad.log"),
        }
    }

    /// Everything the daemon(s) of this test wrote to stderr: those the guard started, then
    /// those a client started (which log into the state dir).
    pub fn log(&self) -> String {
        let mut log = fs::read_to_string(self.log_path()).unwrap_or_default();
        let on_demand = cuba_protocol::paths::daemon_log(&self.state);
        if on_demand != self.log_path() {
            log += &fs::read_to_string(on_demand).unwrap_or_default();
        }
        log
    }

    async fn connect(&self, name: &str) -> Result<Client, cuba_protocol::client::ClientError> {
        Client::connect(&self.socket, this_client(ClientKind::Other, name)).await
    }

    /// A new connection, as client "test".
    pub async fn client(&self) -> Client {
        self.client_named("test").await
    }

    /// A new connection whose owner name is `name`.
    pub async fn client_named(&self, name: &str) -> Client {
        crate::bounded("connect", crate::STEP, self.connect(name))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to cubad: {e}; log:\n{}", self.log()))
    }

    /// `cubactl ARGS` aimed at this daemon (no colour, no stdin, killed if dropped).
    pub fn cubactl(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(crate::bin("cubactl"));
        cmd.args(args)
            .env("CUBA_EXEC_SOCKET", &self.socket)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if let Some((uid, gid)) = self.limits.user {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    /// Runs `cubactl ARGS` against this daemon to its end (bounded): whether it succeeded,
    /// its stdout, its stderr.
    pub async fn ctl(&self, args: &[&str]) -> (bool, String, String) {
        let what = format!("cubactl {}", args.join(" "));
        let out = crate::bounded(&what, crate::STEP, self.cubactl(args).output())
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The pid of the `cubad` the guard started.
    pub fn pid(&self) -> i32 {
        self.child
            .as_ref()
            .map(|c| c.id() as i32)
            .expect("the daemon is not running")
    }

    /// The pid of the daemon serving this socket, from its lock file (whoever started it).
    pub fn daemon_pid(&self) -> Option<i32> {
        let lock = cuba_protocol::paths::lock_path(&self.socket);
        fs::read_to_string(lock).ok()?.trim().parse().ok()
    }

    /// Live `cubad` processes serving this socket (by their command line).
    pub fn daemons(&self) -> Vec<i32> {
        leftovers::given(&self.socket)
            .into_iter()
            .filter(|(_, cmdline)| cmdline.contains("cubad"))
            .map(|(pid, _)| pid)
            .collect()
    }

    /// The daemon's exit status if it has ended (reaping it).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().expect("waitpid failed")?;
        self.child = None;
        Some(status)
    }

    /// Waits (bounded) for the daemon to exit by itself, e.g. after a shutdown request.
    pub async fn wait_daemon_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            let child = self.child.as_mut().expect("the daemon is not running");
            if let Some(status) = child.try_wait().expect("waitpid failed") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "cubad did not exit within {limit:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGKILLs the daemon (not its processes) and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a new `cubad` on the same socket and state dir (SIGKILLing the old one if it is
    /// still running).
    pub async fn restart(&mut self) {
        self.kill9();
        self.launch().await;
    }

    /// Also SIGKILL `pid` (e.g. a client the test started) when the guard drops.
    pub fn kill_on_drop(&mut self, pid: i32) {
        self.also_kill.push(pid);
    }

    /// The token that makes this state dir's process markers unique.
    pub fn instance(&self) -> Option<String> {
        let text = fs::read_to_string(self.state.join("instance")).ok()?;
        Some(text.trim().to_string()).filter(|t| !t.is_empty())
    }

    /// The live processes of process `id`'s tree, by the marker in their environment.
    pub fn marked(&self, id: u64) -> Vec<i32> {
        let instance = self.instance().expect("the daemon wrote no instance file");
        leftovers::marked(&format!("CUBA_EXEC_PROCESS={instance}.{id}"), true)
    }

    /// Every live process any daemon of this test started.
    pub fn all_marked(&self) -> Vec<i32> {
        match self.instance() {
            Some(instance) => all_marked(&instance),
            None => Vec::new(),
        }
    }
}

/// Every live process a daemon with instance token `instance` started.
fn all_marked(instance: &str) -> Vec<i32> {
    leftovers::marked(&format!("CUBA_EXEC_PROCESS={instance}."), false)
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        for pid in self.also_kill.drain(..) {
            procfs::kill9(pid);
        }
        // Read before a small state dir is unmounted.
        let instance = self.instance();
        self.kill9();
        // A daemon a client started is not our child (it daemonized): every `cubad` given this
        // socket, and the lock's holder (a test's stand-in daemon) if it is given it too (a
        // lock file's pid could have been reused).
        let holder = self.daemon_pid();
        for (pid, cmdline) in leftovers::given(&self.socket) {
            if cmdline.contains("cubad") || Some(pid) == holder {
                procfs::kill9(pid);
            }
        }
        if self.small == Some(SmallState::Tmpfs) {
            crate::small_state::unmount(&self.state);
        }
        let Some(instance) = instance else {
            return;
        };
        // Processes fork while they are killed: repeat until a scan finds none.
        for _ in 0..100 {
            let left = all_marked(&instance);
            if left.is_empty() {
                break;
            }
            left.into_iter().for_each(procfs::kill9);
            std::thread::sleep(Duration::from_millis(5));
        }
        // A killed daemon's cgroups (`CUBA_EXEC_CGROUPS=on`) are not left in the machine's tree.
        crate::cgroups::remove_instance(&instance);
    }
}
