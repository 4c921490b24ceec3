//! Shared helpers for the MCP tests: a [`TestDir`] guard (short temp dir, private `cubad`, and a
//! `Drop` that SIGKILLs the daemon and every process it started), bounded awaits, and the MCP
//! client side in [`mcp`].
//!
//! Every await in these tests is bounded: a hung daemon or shim fails a test instead of
//! hanging the suite.

#![allow(dead_code, reason = "each test binary uses a subset of the helpers")]

pub mod hosts;
pub mod mcp;

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cuba_protocol::client::{this_client, Client};
use cuba_protocol::ClientKind;
use tempfile::TempDir;

/// How long one ordinary step (a tool call, a short process) may take before the test fails.
pub const STEP: Duration = Duration::from_secs(20);

/// Grace period (TERM → KILL) every test daemon uses.
pub const GRACE: &str = "500ms";

/// The end-to-end suite's bounded await and condition re-check (not every test file uses both).
#[allow(unused_imports)]
pub use cuba_tests::{bounded, wait_for};

/// The shim binary under test.
pub fn shim_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cuba-exec"))
}

/// `cubad`, built beside the shim (`cargo build --workspace --bins`).
pub fn cubad_bin() -> PathBuf {
    let path = shim_bin()
        .parent()
        .expect("the shim binary lives in target/<profile>")
        .join("cubad");
    assert!(
        path.is_file(),
        "{} not found: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// True if `pid` exists and is not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|at| stat[at + 1..].trim_start().chars().next());
    state.is_some_and(|s| s != 'Z' && s != 'X')
}

/// SIGKILLs `pid`, ignoring a process that is already gone.
pub fn kill9(pid: i32) {
    if pid > 0 {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Live processes whose environment holds an entry starting with `prefix`.
pub fn with_env_prefix(prefix: &str) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|kv| kv.starts_with(prefix.as_bytes()))
            })
        })
        .filter(|pid| pid_alive(*pid))
        .collect()
}

/// A test's private world: `<dir>/s` socket, `<dir>/state` state dir, optionally a `cubad` we
/// started in the foreground. Its `Drop` SIGKILLs that daemon, an auto-started one (pid in
/// `<dir>/s.lock`), shims it was told about, and every process carrying this state dir's
/// marker, then removes the dir.
pub struct TestDir {
    dir: TempDir,
    daemon: Option<Child>,
    extra: Vec<i32>,
}

impl TestDir {
    pub fn new() -> TestDir {
        let dir = tempfile::Builder::new()
            .prefix("cm")
            // Private, as the daemon requires of its socket and state directories.
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in("/tmp")
            .expect("cannot create a temp dir in /tmp");
        TestDir {
            dir,
            daemon: None,
            extra: Vec::new(),
        }
    }

    /// A dir with `cubad` already running on its socket (for in-process servers, which must not
    /// auto-start through process-global environment variables).
    pub async fn with_daemon() -> TestDir {
        Self::with_daemon_env(&[]).await
    }

    /// Like [`TestDir::with_daemon`], with `env` set for `cubad` (e.g. its limits).
    pub async fn with_daemon_env(env: &[(&str, &str)]) -> TestDir {
        let mut t = TestDir::new();
        t.start_daemon(env).await;
        t
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.path().join("s")
    }

    pub fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    fn log_path(&self) -> PathBuf {
        self.path().join("cubad.log")
    }

    /// The foreground daemon's log, or the auto-started one's (in the state dir).
    pub fn log(&self) -> String {
        let own = fs::read_to_string(self.log_path()).unwrap_or_default();
        let auto = fs::read_to_string(self.state().join("cubad.log")).unwrap_or_default();
        own + &auto
    }

    /// The environment a shim binary needs to auto-start a private daemon here.
    pub fn shim_env(&self) -> Vec<(String, String)> {
        let s = |p: PathBuf| p.to_string_lossy().into_owned();
        vec![
            ("CUBA_EXEC_SOCKET".into(), s(self.socket())),
            ("CUBA_EXEC_STATE_DIR".into(), s(self.state())),
            ("CUBA_EXEC_DAEMON".into(), s(cubad_bin())),
            ("CUBA_EXEC_SHUTDOWN_TIMEOUT".into(), GRACE.into()),
            (
                "CUBA_EXEC_APPROVALS".into(),
                s(self.path().join("approvals.toml")),
            ),
            (
                "CUBA_EXEC_TOKENS".into(),
                s(self.path().join("tokens.toml")),
            ),
            ("CUBA_EXEC_NOTIFY".into(), "off".into()),
        ]
    }

    /// Also SIGKILL `pid` (e.g. a shim child) when the guard drops.
    pub fn kill_on_drop(&mut self, pid: i32) {
        self.extra.push(pid);
    }

    async fn start_daemon(&mut self, env: &[(&str, &str)]) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("cannot open the daemon log");
        let mut cmd = Command::new(cubad_bin());
        cmd.arg("--socket")
            .arg(self.socket())
            .arg("--state-dir")
            .arg(self.state())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("cannot clone the log fd"))
            .stderr(log);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CUBA_EXEC_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("CUBA_EXEC_SHUTDOWN_TIMEOUT", GRACE);
        cmd.env("CUBA_EXEC_APPROVALS", self.path().join("approvals.toml"));
        cmd.env("CUBA_EXEC_TOKENS", self.path().join("tokens.toml"));
        cmd.env("CUBA_EXEC_NOTIFY", "off");
        cmd.envs(env.iter().copied());
        self.daemon = Some(cmd.spawn().expect("cannot start cubad"));
        let deadline = Instant::now() + Duration::from_secs(10);
        // No event says the socket is bound: try until a handshake succeeds.
        let socket = self.socket();
        loop {
            let probe = Client::connect(&socket, this_client(ClientKind::Other, "probe"));
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(5), probe).await {
                return;
            }
            if let Some(Ok(Some(status))) = self.daemon.as_mut().map(Child::try_wait) {
                panic!("cubad exited at start-up ({status}); log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "cubad did not accept a client within 10 s; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The token that makes this state dir's process markers unique.
    pub fn instance(&self) -> Option<String> {
        let text = fs::read_to_string(self.state().join("instance")).ok()?;
        Some(text.trim().to_string()).filter(|t| !t.is_empty())
    }

    /// Live processes of process `id`'s tree (by their `CUBA_EXEC_PROCESS` marker).
    pub fn marked(&self, id: u64) -> Vec<i32> {
        let instance = self.instance().expect("the daemon wrote no instance file");
        let exact = format!("CUBA_EXEC_PROCESS={instance}.{id}");
        with_env_prefix(&exact)
            .into_iter()
            .filter(|pid| {
                fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == exact.as_bytes()))
            })
            .collect()
    }

    /// Every live process any daemon of this dir started.
    pub fn all_marked(&self) -> Vec<i32> {
        match self.instance() {
            Some(instance) => with_env_prefix(&format!("CUBA_EXEC_PROCESS={instance}.")),
            None => Vec::new(),
        }
    }

    /// The pid of the daemon serving this dir's socket, from its lock file.
    pub fn daemon_pid(&self) -> Option<i32> {
        let text = fs::read_to_string(self.path().join("s.lock")).ok()?;
        text.trim().parse().ok()
    }

    /// Live `cubad` processes serving this dir's socket (by command line).
    pub fn daemons(&self) -> Vec<i32> {
        let socket = self.socket().to_string_lossy().into_owned();
        let Ok(dir) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                cmdline.contains("cubad") && cmdline.contains(&socket)
            })
            .filter(|pid| pid_alive(*pid))
            .collect()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        for pid in self.extra.drain(..) {
            kill9(pid);
        }
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // An auto-started daemon: only the process that really serves this socket (the lock
        // file's pid could have been reused).
        let daemons = self.daemons();
        if let Some(pid) = self.daemon_pid().filter(|p| daemons.contains(p)) {
            kill9(pid);
        }
        for pid in daemons {
            kill9(pid);
        }
        // Processes fork while they are killed: repeat until a scan finds none.
        for _ in 0..100 {
            let left = self.all_marked();
            if left.is_empty() {
                break;
            }
            left.into_iter().for_each(kill9);
            std::thread::sleep(Duration::from_millis(5));
        }
        // A killed daemon's cgroups (`CUBA_EXEC_CGROUPS=on`) are not left in the machine's tree.
        if let Some(instance) = self.instance() {
            cuba_tests::cgroups::remove_instance(&instance);
        }
    }
}
