//! What a test daemon is started with: the settings every daemon of a private world gets
//! (whether the guard starts it or a client does), the foreground start of `cubad`, and the
//! wait until it answers.

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{TestDaemon, TEST_GRACE};
use crate::raw;

/// How long a starting daemon may take to accept a connection (generous: a busy 2-core machine
/// running many test daemons at once can be slow, and a daemon that never answers still fails).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Removes the `CUBA_EXEC_*` settings this test process has from `cmd`'s environment: those
/// of the surrounding environment must not change what a test sees.
pub(super) fn without_outside_settings(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CUBA_EXEC_") {
            cmd.env_remove(name);
        }
    }
}

impl TestDaemon {
    /// Every daemon's settings in this world: the short grace period and files of its own, then
    /// the test's (a test's value replaces a default of the same name).
    fn settings(&self) -> Vec<(String, OsString)> {
        let dir = self.dir.path();
        let mut vars: Vec<(String, OsString)> = vec![
            ("CUBA_EXEC_SHUTDOWN_TIMEOUT".into(), TEST_GRACE.into()),
            // Not the user's config file: an empty one (a test may pass its own).
            ("CUBA_EXEC_CONFIG".into(), "/dev/null".into()),
            // Remembered approvals of the test's own, and no desktop notifications.
            (
                "CUBA_EXEC_APPROVALS".into(),
                dir.join("approvals.toml").into(),
            ),
            ("CUBA_EXEC_NOTIFY".into(), "off".into()),
            // The HTTP endpoint's tokens, which the daemon keeps (tests/src/http.rs names the
            // same).
            ("CUBA_EXEC_TOKENS".into(), dir.join("tokens.toml").into()),
        ];
        for (name, value) in &self.env {
            vars.retain(|(k, _)| k != name);
            vars.push((name.clone(), value.into()));
        }
        vars
    }

    /// The environment of a client of this world (`cubactl`, `cuba-exec`): its socket and
    /// state dir, and `cubad` with the daemon's settings, which a daemon the client starts
    /// inherits.
    pub fn client_env(&self) -> Vec<(String, OsString)> {
        let mut vars: Vec<(String, OsString)> = vec![
            ("CUBA_EXEC_SOCKET".into(), self.socket.clone().into()),
            ("CUBA_EXEC_STATE_DIR".into(), self.state.clone().into()),
            ("CUBA_EXEC_DAEMON".into(), crate::bin("cubad").into()),
        ];
        vars.extend(self.settings());
        vars
    }

    /// `program` as a client of this world: [`TestDaemon::client_env`] in place of the
    /// surrounding `CUBA_EXEC_*` settings, run as the daemon's user when it has another.
    pub fn client_command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        without_outside_settings(&mut cmd);
        cmd.envs(self.client_env());
        if let Some((uid, gid)) = self.limits.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    /// Starts `cubad` on this socket and state dir and waits until it accepts a client.
    pub(super) async fn launch(&mut self) {
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
        without_outside_settings(&mut cmd);
        cmd.envs(self.settings());
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
                if let Some(hosts) = &limits.hosts {
                    crate::machine::own_hosts_file(hosts)?;
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
}
