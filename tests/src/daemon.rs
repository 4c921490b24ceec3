//! [`TestDaemon`]: a real `cubad` in the foreground on a socket in a short temp dir, and a guard
//! whose `Drop` kills it and every process it started (found by their environment marker).

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use cuba_protocol::client::{this_client, Client};
use cuba_protocol::ClientKind;
use tempfile::TempDir;

pub use crate::small_state::SmallState;
use crate::{procfs, raw};

/// How long a starting daemon may take to accept a connection (generous: a busy 2-core machine
/// running many test daemons at once can be slow, and a daemon that never answers still fails).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Grace period (TERM → KILL) the test daemons use unless a test sets another.
pub const TEST_GRACE: &str = "300ms";

/// Options for a [`TestDaemon`]: environment variables passed to `cubad`.
#[derive(Debug, Default)]
pub struct Builder {
    env: Vec<(String, String)>,
    ignored: Vec<i32>,
    limits: Limits,
}

/// What the daemon's process is started with besides its environment.
#[derive(Debug, Default, Clone)]
struct Limits {
    /// A state directory (log included) of this many bytes: a tmpfs of its own when this user
    /// may mount one, else a file-size limit on the daemon (`RLIMIT_FSIZE`).
    small_state: Option<u64>,
    /// `RLIMIT_NOFILE`, soft and hard.
    open_files: Option<u64>,
    /// Started under a seccomp filter that refuses `seccomp(2)` itself, as a container whose
    /// profile forbids it: the daemon cannot check execs.
    no_seccomp: bool,
    /// Run as this (uid, gid) rather than the test's own user (the test is root).
    user: Option<(u32, u32)>,
}

impl Builder {
    /// Passes `name=value` to `cubad` (e.g. `CUBA_EXEC_MAX_PROCS`, `CUBA_EXEC_BUFFER_SIZE`).
    pub fn env(mut self, name: &str, value: &str) -> Builder {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Starts `cubad` with `signals` ignored, as a shell's background job or `nohup` would.
    pub fn ignoring(mut self, signals: &[i32]) -> Builder {
        self.ignored.extend_from_slice(signals);
        self
    }

    /// A state directory of `bytes` (the daemon's log in it): see [`SmallState`].
    pub fn small_state(mut self, bytes: u64) -> Builder {
        self.limits.small_state = Some(bytes);
        self
    }

    /// Starts `cubad` able to open at most `n` files (soft and hard limit).
    pub fn open_files(mut self, n: u64) -> Builder {
        self.limits.open_files = Some(n);
        self
    }

    /// Starts `cubad` where `seccomp(2)` fails (ENOSYS), as in a container that forbids it.
    pub fn without_seccomp(mut self) -> Builder {
        self.limits.no_seccomp = true;
        self
    }

    /// Runs `cubad` as user `uid`/`gid` (the test must be root): only [`TestDaemon::cubactl`],
    /// which runs as that user too, reaches it; [`TestDaemon::client`] is refused (another uid).
    pub fn as_user(mut self, uid: u32, gid: u32) -> Builder {
        self.limits.user = Some((uid, gid));
        self
    }

    /// `CUBA_EXEC_MAX_PROCS`.
    pub fn max_procs(self, n: usize) -> Builder {
        self.env("CUBA_EXEC_MAX_PROCS", &n.to_string())
    }

    /// `CUBA_EXEC_SHUTDOWN_TIMEOUT` (default here: [`TEST_GRACE`]).
    pub fn grace(self, value: &str) -> Builder {
        self.env("CUBA_EXEC_SHUTDOWN_TIMEOUT", value)
    }

    pub async fn start(self) -> TestDaemon {
        let dir = tempfile::Builder::new()
            .prefix("cx")
            // Private, as the daemon requires of its socket and state directories.
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in("/tmp")
            .expect("cannot create a temp dir in /tmp");
        let socket = dir.path().join("s");
        let state = dir.path().join("state");
        if let Some((uid, gid)) = self.limits.user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("cannot give the temp dir to the daemon's user");
        }
        let mut limits = self.limits;
        let small = limits.small_state.map(|bytes| {
            let made = SmallState::make(&state, bytes);
            if made == SmallState::Tmpfs {
                // The tmpfs is the limit; no file-size limit on top.
                limits.small_state = None;
            }
            made
        });
        let mut d = TestDaemon {
            dir,
            socket,
            state,
            env: self.env,
            ignored: self.ignored,
            limits,
            small,
            child: None,
        };
        d.launch().await;
        d
    }
}

/// A running `cubad` owned by one test.
#[derive(Debug)]
pub struct TestDaemon {
    dir: TempDir,
    socket: PathBuf,
    state: PathBuf,
    env: Vec<(String, String)>,
    ignored: Vec<i32>,
    limits: Limits,
    /// How the small state directory was made, if the test asked for one.
    small: Option<SmallState>,
    child: Option<Child>,
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

    /// Where the daemon's stderr goes: beside the state dir, or in a small one (so that it
    /// fills with everything else).
    fn log_path(&self) -> PathBuf {
        match self.small {
            Some(_) => self.state.join("cubad.log"),
            None => self.dir.path().join("cubad.log"),
        }
    }

    /// Everything the daemon(s) of this test wrote to stderr.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Starts `cubad` on this socket and state dir and waits until it accepts a client.
    async fn launch(&mut self) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("cannot open the daemon log");
        let mut cmd = Command::new(crate::bin("cubad"));
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(&self.state)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("cannot clone the log fd"))
            .stderr(log);
        // Settings of the surrounding environment must not change what a test sees.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CUBA_EXEC_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("CUBA_EXEC_SHUTDOWN_TIMEOUT", TEST_GRACE);
        // Nor must the user's config file: an empty one (a test may pass its own).
        cmd.env("CUBA_EXEC_CONFIG", "/dev/null");
        // Remembered approvals of the test's own, and no desktop notifications.
        cmd.env(
            "CUBA_EXEC_APPROVALS",
            self.dir.path().join("approvals.toml"),
        );
        cmd.env("CUBA_EXEC_NOTIFY", "off");
        // The HTTP endpoint's tokens, which the daemon keeps (tests/src/http.rs names the same).
        cmd.env("CUBA_EXEC_TOKENS", self.dir.path().join("tokens.toml"));
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some((uid, gid)) = self.limits.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid);
        }
        let ignored = self.ignored.clone();
        let limits = self.limits.clone();
        // SAFETY: signal(2) and setrlimit(2) are async-signal-safe; what they use was copied
        // before the fork.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                for sig in &ignored {
                    libc::signal(*sig, libc::SIG_IGN);
                }
                let set = |resource, n: u64| {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    match libc::setrlimit(resource, &lim) {
                        0 => Ok(()),
                        _ => Err(std::io::Error::last_os_error()),
                    }
                };
                if let Some(n) = limits.small_state {
                    set(libc::RLIMIT_FSIZE, n)?;
                }
                if let Some(n) = limits.open_files {
                    set(libc::RLIMIT_NOFILE, n)?;
                }
                if limits.no_seccomp {
                    crate::machine::forbid_seccomp()?;
                }
                Ok(())
            });
        }
        self.child = Some(cmd.spawn().expect("cannot start cubad"));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.try_wait() {
                panic!("cubad exited at start-up ({status}); log:\n{}", self.log());
            }
            // No event tells that the socket is bound: try until it answers. A bare stream, so
            // the probe connection closes when it is dropped.
            let probe = tokio::time::timeout_at(deadline.into(), self.probe()).await;
            if probe.is_ok_and(|ok| ok) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "cubad did not accept a connection within {START_TIMEOUT:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether the daemon answers a hello with a welcome (unbounded: the caller bounds it).
    /// Panics on a refusal.
    async fn probe(&self) -> bool {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // Another user's daemon refuses this process: its own user asks.
        if self.limits.user.is_some() {
            let status = self
                .cubactl(&["daemon", "status"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await;
            return status.is_ok_and(|s| s.success());
        }
        let Ok(mut s) = tokio::net::UnixStream::connect(&self.socket).await else {
            return false;
        };
        let hello = raw::hello(false);
        let mut frame = (hello.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&hello);
        let mut len = [0u8; 4];
        if s.write_all(&frame).await.is_err() || s.read_exact(&mut len).await.is_err() {
            return false;
        }
        let mut reply = vec![0u8; u32::from_be_bytes(len) as usize];
        if s.read_exact(&mut reply).await.is_err() {
            return false;
        }
        // An answer that is not a welcome will not change on retry (e.g. a stale binary).
        if let Err(e) = cuba_protocol::handshake::decode_welcome(&reply) {
            panic!("cubad refused the test's hello: {e}");
        }
        // Until the daemon has closed its end: a test that counts connections (or the
        // daemon's descriptors) starts from none.
        let _ = s.shutdown().await;
        while let Ok(1..) = s.read(&mut len).await {}
        true
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

    /// The pid of the current `cubad`.
    /// `cubactl ARGS` aimed at this daemon (no colour, no stdin, killed if dropped).
    pub fn cubactl(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(crate::bin("cubactl"));
        cmd.args(args)
            .env("CUBA_EXEC_SOCKET", &self.socket)
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some((uid, gid)) = self.limits.user {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    pub fn pid(&self) -> i32 {
        self.child
            .as_ref()
            .map(|c| c.id() as i32)
            .expect("the daemon is not running")
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

    /// The token that makes this state dir's process markers unique.
    pub fn instance(&self) -> Option<String> {
        let text = fs::read_to_string(self.state.join("instance")).ok()?;
        Some(text.trim().to_string())
    }

    /// The live processes of process `id`'s tree, by the marker in their environment.
    pub fn marked(&self, id: u64) -> Vec<i32> {
        let instance = self.instance().expect("the daemon wrote no instance file");
        procfs::with_env(&format!("CUBA_EXEC_PROCESS={instance}.{id}"), true)
    }

    /// Every live process any daemon of this test started.
    pub fn all_marked(&self) -> Vec<i32> {
        match self.instance() {
            Some(instance) => procfs::with_env(&format!("CUBA_EXEC_PROCESS={instance}."), false),
            None => Vec::new(),
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        // Read before a small state dir is unmounted.
        let instance = self.instance();
        self.kill9();
        if self.small == Some(SmallState::Tmpfs) {
            crate::small_state::unmount(&self.state);
        }
        // Processes fork while they are killed: repeat until a scan finds none.
        for _ in 0..50 {
            let left = self.all_marked();
            if left.is_empty() {
                break;
            }
            for pid in left {
                procfs::kill9(pid);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(instance) = instance {
            crate::cgroups::remove_instance(&instance);
        }
    }
}
