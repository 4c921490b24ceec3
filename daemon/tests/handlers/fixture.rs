//! [`Daemon`]: one test's private `cubad`, the real binary of this build, started in the
//! foreground with a directory of its own (the socket or pipe, the state directory, an empty
//! settings file, approvals and tokens files) and none of the surrounding `CUBA_EXEC_*`
//! settings. On Unix the socket is `DIR/s`; on Windows the pipe is `\\.\pipe\cuba-exec-handlers-…`
//! (a client finds the user's pipe by the user's SID, so a name of its own keeps the test's
//! daemon apart from the user's, as `tests/python/test_windows.py` does with `CUBA_EXEC_SOCKET`).
//!
//! The guard's `Drop` asks the daemon to stop (forced: every tree it runs is stopped), waits
//! for its exit, kills it if it does not exit, and on Linux kills whatever still carries the
//! daemon's process marker (on Windows each tree is a Job Object that dies with the daemon's
//! handle). Every wait is bounded ([`STEP`]).

use std::fs::{self, File};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cuba_protocol::client::{this_client, Client, ClientError};
use cuba_protocol::{
    ClientInfo, ClientKind, Hello, ProcessInfo, RunRequest, ShutdownRequest, SpawnRequest,
    WaitRequest, WaitResult, WaitSpec,
};
use tempfile::TempDir;

/// The bound of one step: a call, a wait, a start. Generous (a busy 2-core machine; Wine starts
/// programs slowly): it turns a hang into a failure and is never what a test measures.
pub const STEP: Duration = Duration::from_secs(if cfg!(windows) { 60 } else { 20 });

/// The daemon's grace period (TERM → KILL), short: stops in these tests need not be gentle.
const GRACE: &str = "300ms";

/// The name every test client gives in its hello.
pub const CLIENT: &str = "handlers";

/// `fut`, or a failure naming `what` once [`STEP`] has passed.
pub async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(STEP, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {STEP:?}"),
    }
}

/// Polls `cond` until it holds, at most [`STEP`]: for a state no event announces to the test
/// (a socket that accepts, a process gone from the machine).
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + STEP;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {STEP:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// This test process as a client, without the surrounding `CUBA_EXEC_*` settings (a client's
/// own would narrow the policy its commands run under).
pub fn client_info() -> ClientInfo {
    let mut info = this_client(ClientKind::Other, CLIENT);
    info.env
        .retain(|(k, _)| !k.to_string_lossy().starts_with("CUBA_EXEC_"));
    info
}

pub struct Daemon {
    dir: TempDir,
    socket: PathBuf,
    state: PathBuf,
    child: Option<Child>,
    /// The shell named in each request: `cmd.exe` on Windows where the default is PowerShell
    /// (these tests' texts are cmd's); `None` (the daemon's default) elsewhere.
    shell: Option<String>,
}

impl Daemon {
    /// A new private daemon, serving.
    pub async fn start() -> Daemon {
        let dir = private_temp_dir();
        let socket = match cfg!(windows) {
            true => PathBuf::from(format!(r"\\.\pipe\cuba-exec-handlers-{}", unique())),
            false => dir.path().join("s"),
        };
        let state = dir.path().join("state");
        fs::write(dir.path().join("config.toml"), "").expect("cannot write the settings file");
        let mut d = Daemon {
            dir,
            socket,
            state,
            child: None,
            shell: None,
        };
        d.launch().await;
        let c = d.client().await;
        let default = bounded("status", c.status()).await.expect("status").shell;
        let is_cmd = default.to_ascii_lowercase().ends_with("cmd.exe");
        if cfg!(windows) && !is_cmd {
            d.shell = Some("cmd.exe".into());
        }
        d
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    /// The pid of the running `cubad`.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon is not running").id()
    }

    /// What the daemon wrote to stderr (its log), for failure messages.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("cubad.log")).unwrap_or_default()
    }

    /// Starts `cubad` on this socket and state dir and waits until it answers a client.
    async fn launch(&mut self) {
        let dir = self.dir.path();
        let log = File::options()
            .create(true)
            .append(true)
            .open(dir.join("cubad.log"))
            .expect("cannot open the daemon's log");
        let mut cmd = Command::new(program_path(env!("CARGO_BIN_EXE_cubad")));
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CUBA_EXEC_") {
                cmd.env_remove(name);
            }
        }
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(&self.state)
            .env("CUBA_EXEC_CONFIG", dir.join("config.toml"))
            .env("CUBA_EXEC_APPROVALS", dir.join("approvals.toml"))
            .env("CUBA_EXEC_TOKENS", dir.join("tokens.toml"))
            .env("CUBA_EXEC_NOTIFY", "off")
            .env("CUBA_EXEC_SHUTDOWN_TIMEOUT", GRACE)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("cannot share the log"))
            .stderr(log);
        self.child = Some(cmd.spawn().expect("cannot start cubad"));
        let deadline = Instant::now() + STEP;
        loop {
            if let Some(status) = self.exited() {
                panic!("cubad exited at start-up ({status}); log:\n{}", self.log());
            }
            // Nothing announces that the socket or pipe is there: try until a client is served.
            let attempt = tokio::time::timeout_at(deadline.into(), self.connect()).await;
            match attempt {
                Ok(Ok(_)) => return,
                Ok(Err(ClientError::Connect { .. })) | Err(_) => {}
                Ok(Err(e)) => panic!("cubad refused the test: {e}; log:\n{}", self.log()),
            }
            assert!(
                Instant::now() < deadline,
                "cubad did not serve within {STEP:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The daemon's exit status, once it has exited (reaping it).
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let status = self
            .child
            .as_mut()?
            .try_wait()
            .expect("cannot wait for cubad")?;
        self.child = None;
        Some(status)
    }

    /// A new connection, or why not (unbounded: the caller bounds it).
    pub async fn connect(&self) -> Result<Client, ClientError> {
        Client::connect(&self.socket, client_info()).await
    }

    /// A new connection as client [`CLIENT`].
    pub async fn client(&self) -> Client {
        bounded("connect", self.connect())
            .await
            .unwrap_or_else(|e| panic!("cannot connect to cubad: {e}; log:\n{}", self.log()))
    }

    /// A connection with this hello (the daemon's answer as it is).
    pub async fn connect_as(&self, hello: Hello) -> Result<Client, ClientError> {
        bounded("connect", Client::connect_as(&self.socket, hello)).await
    }

    /// The request that runs `text` with this OS's shell for these tests.
    pub fn req(&self, text: &str) -> SpawnRequest {
        SpawnRequest {
            command: text.to_string(),
            shell: self.shell.clone(),
            ..SpawnRequest::default()
        }
    }

    /// Stops the daemon as a person does (`daemon stop --force`) and waits for its exit.
    pub async fn stop(&mut self) {
        let c = self.client().await;
        let stop = cuba_protocol::Request::Shutdown(ShutdownRequest { force: true });
        let answer = bounded("shutdown", c.call(stop)).await;
        assert!(
            matches!(answer, Ok(_) | Err(ClientError::Closed)),
            "{answer:?}"
        );
        drop(c);
        let deadline = Instant::now() + STEP;
        while self.exited().is_none() {
            assert!(
                Instant::now() < deadline,
                "cubad did not exit within {STEP:?} of its shutdown; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the daemon, then starts a new one on the same socket and state directory.
    pub async fn restart(&mut self) {
        self.stop().await;
        self.launch().await;
    }
}

/// A `spawn`, answered within [`STEP`].
pub async fn spawn(c: &Client, req: SpawnRequest) -> ProcessInfo {
    bounded("spawn", c.spawn(req))
        .await
        .unwrap_or_else(|e| panic!("spawn refused: {e}"))
}

/// A `spawn` of [`crate::os::text::long`] or [`crate::os::text::tree`], returned once its last
/// program runs (its output says so). Under Wine a process ended while it is still starting
/// (a job's kill that comes while `cmd` creates a program) is never told: it hangs half-made
/// for ever, holding the test's output pipe. So nothing is stopped before it runs.
pub async fn spawn_running(c: &Client, req: SpawnRequest) -> ProcessInfo {
    let p = spawn(c, req).await;
    let spec = WaitSpec {
        until: Some(crate::os::text::RUNNING.into()),
        ..WaitSpec::exit(STEP.as_millis() as u64, 1 << 16)
    };
    let req = WaitRequest {
        id: p.id,
        since: Some(0),
        spec,
    };
    let w = bounded("wait for the start", c.wait(req)).await.unwrap();
    assert!(
        matches!(w.reason, cuba_protocol::WaitReason::Matched(_)),
        "{w:?}"
    );
    p
}

/// A `run` to the end of its process (or [`STEP`]).
pub async fn run(c: &Client, spawn: SpawnRequest) -> WaitResult {
    let wait = WaitSpec::exit(STEP.as_millis() as u64, 1 << 20);
    bounded("run", async {
        let running = c.run(RunRequest { spawn, wait }).await?;
        running.result().await
    })
    .await
    .unwrap_or_else(|e| panic!("run failed: {e}"))
}

/// Waits for process `id`'s end (or [`STEP`]), with all its output from the start.
pub async fn wait_exit(c: &Client, id: u64) -> WaitResult {
    let req = WaitRequest {
        id,
        since: Some(0),
        spec: WaitSpec::exit(STEP.as_millis() as u64, 1 << 20),
    };
    bounded("wait", c.wait(req))
        .await
        .unwrap_or_else(|e| panic!("wait failed: {e}"))
}

/// A temporary directory only this user may enter: in `/tmp` on Unix (a socket's path must be
/// short), the user's temporary directory on Windows.
fn private_temp_dir() -> TempDir {
    let mut b = tempfile::Builder::new();
    b.prefix("cxh");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(fs::Permissions::from_mode(0o700));
        b.tempdir_in("/tmp")
            .expect("cannot make a directory in /tmp")
    }
    #[cfg(not(unix))]
    b.tempdir().expect("cannot make a temporary directory")
}

/// A name no other test of any process uses now.
fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{}-{n}-{nanos:x}", std::process::id())
}

/// The path cargo gave at build time, as this OS opens it: a cross-built Windows test got a
/// Linux path (`/work/…`), which Wine shows on drive `Z:`.
fn program_path(built: &str) -> PathBuf {
    match cfg!(windows) && built.starts_with('/') {
        true => PathBuf::from(format!("Z:{}", built.replace('/', "\\"))),
        false => PathBuf::from(built),
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_none() {
            return;
        }
        // A runtime of its own on a thread of its own: `drop` may run inside the test's.
        let (socket, instance) = (self.socket.clone(), self.instance());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    let stop = async {
                        let c = Client::connect(&socket, client_info()).await.ok()?;
                        let force = ShutdownRequest { force: true };
                        c.call(cuba_protocol::Request::Shutdown(force)).await.ok()
                    };
                    let _ = tokio::time::timeout(STEP, stop).await;
                });
            }
        })
        .join();
        // (No panic here: a test that failed is unwinding already.)
        let deadline = Instant::now() + STEP;
        while let Some(child) = self.child.as_mut() {
            match child.try_wait() {
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(Some(_)) | Err(_) => self.child = None,
                Ok(None) => break,
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(instance) = instance {
            crate::os::kill_marked(&instance);
        }
    }
}

impl Daemon {
    /// The token of this state directory's process markers (`CUBA_EXEC_PROCESS=<it>.<id>`).
    fn instance(&self) -> Option<String> {
        let text = fs::read_to_string(self.state.join("instance")).ok()?;
        Some(text.trim().to_string()).filter(|t| !t.is_empty())
    }
}
