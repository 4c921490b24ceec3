//! [`Builder`]: the options of a [`TestDaemon`] (the daemon's environment, and what its process
//! is started with), and the making of its private directory.

use std::path::Path;

use super::{SmallState, TestDaemon};

/// Options for a [`TestDaemon`]: environment variables passed to `cubad`.
#[derive(Debug, Default)]
pub struct Builder {
    env: Vec<(String, String)>,
    ignored: Vec<i32>,
    limits: Limits,
}

/// What the daemon's process is started with besides its environment (only a daemon the guard
/// starts: a client that starts one gives it its environment alone).
#[derive(Debug, Default, Clone)]
pub(super) struct Limits {
    /// A state directory (log included) of this many bytes: a tmpfs of its own when this user
    /// may mount one, else a file-size limit on the daemon (`RLIMIT_FSIZE`).
    pub(super) small_state: Option<u64>,
    /// `RLIMIT_NOFILE`, soft and hard.
    pub(super) open_files: Option<u64>,
    /// Started under a seccomp filter that refuses `seccomp(2)` itself, as a container whose
    /// profile forbids it: the daemon cannot check execs.
    pub(super) no_seccomp: bool,
    /// Run as this (uid, gid) rather than the test's own user (the test is root).
    pub(super) user: Option<(u32, u32)>,
    /// A hosts file seen as `/etc/hosts` by the daemon (a mount namespace of its own; the
    /// test must be root): names its proxy resolves without any resolver.
    pub(super) hosts: Option<std::ffi::CString>,
}

impl Builder {
    /// Passes `name=value` to `cubad` (e.g. `CUBA_EXEC_MAX_PROCS`, `CUBA_EXEC_BUFFER_SIZE`).
    pub fn env(mut self, name: &str, value: &str) -> Builder {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// [`Builder::env`] for each of `vars`.
    pub fn envs(self, vars: &[(&str, &str)]) -> Builder {
        vars.iter()
            .fold(self, |b, (name, value)| b.env(name, value))
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

    /// Runs `cubad` in a mount namespace of its own where `/etc/hosts` is `file` (the test
    /// must be root): how a test gives names to its loopback servers.
    pub fn hosts_file(mut self, file: &Path) -> Builder {
        self.limits.hosts = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).ok();
        self
    }

    /// `CUBA_EXEC_MAX_PROCS`.
    pub fn max_procs(self, n: usize) -> Builder {
        self.env("CUBA_EXEC_MAX_PROCS", &n.to_string())
    }

    /// `CUBA_EXEC_SHUTDOWN_TIMEOUT` (default here: [`super::TEST_GRACE`]).
    pub fn grace(self, value: &str) -> Builder {
        self.env("CUBA_EXEC_SHUTDOWN_TIMEOUT", value)
    }

    /// Starts `cubad` in the foreground and waits until it answers.
    pub async fn start(self) -> TestDaemon {
        let mut d = self.on_demand();
        d.launch().await;
        d
    }

    /// The private world with no daemon yet: a client given [`TestDaemon::client_env`]
    /// (`cubactl`, `cuba-exec`) starts one when it first connects, as it does for a person.
    /// The guard ends it as it ends a daemon it started.
    pub fn on_demand(self) -> TestDaemon {
        let dir = tempfile::Builder::new()
            .prefix("cx")
            // Private, as the daemon requires of its socket and state directories.
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in("/tmp")
            .expect("cannot create a temp dir in /tmp");
        if let Some((uid, gid)) = self.limits.user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("cannot give the temp dir to the daemon's user");
        }
        let state = dir.path().join("state");
        let mut limits = self.limits;
        let small = limits
            .small_state
            .map(|bytes| small_state(&state, bytes, &mut limits));
        TestDaemon {
            socket: dir.path().join("s"),
            dir,
            state,
            env: self.env,
            ignored: self.ignored,
            limits,
            small,
            child: None,
            also_kill: Vec::new(),
        }
    }
}

/// Makes the small state dir `state` of `bytes`; a tmpfs is the limit, with no file-size limit
/// on top.
fn small_state(state: &Path, bytes: u64, limits: &mut Limits) -> SmallState {
    let made = SmallState::make(state, bytes);
    if made == SmallState::Tmpfs {
        limits.small_state = None;
    }
    made
}
