//! What the daemon benches share: a private foreground `cubad` (killed with everything it
//! started when dropped), requests as clients make them, and figures.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cuba_protocol::client::{this_client, Client};
use cuba_protocol::{
    ClientKind, ProcessInfo, RunRequest, Signal, SignalRequest, SpawnRequest, WaitReason,
    WaitRequest, WaitSpec,
};

/// A foreground `cubad` in a temp dir. Dropping it kills the daemon and everything it started.
pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    state: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    pub fn start(env: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("cxb")
            // Private, as the daemon requires of its socket and state directories.
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in("/tmp")
            .unwrap();
        let (socket, state) = (dir.path().join("s"), dir.path().join("state"));
        let log = std::fs::File::create(dir.path().join("cubad.log")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cubad"));
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        // SAFETY: the hook only makes an async-signal-safe system call (where the OS has one).
        unsafe {
            cmd.pre_exec(cuba_daemon::platform::process::die_with_parent);
        }
        let child = cmd.spawn().unwrap();
        Daemon {
            child,
            socket,
            state,
            _dir: dir,
        }
    }

    /// Connects, retrying with a bounded backoff while the daemon starts up.
    pub async fn connect(&mut self) -> Client {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut pause = Duration::from_millis(1);
        loop {
            let info = this_client(ClientKind::Other, "bench");
            match Client::connect(&self.socket, info).await {
                Ok(c) => return c,
                Err(e) => {
                    let exited = self.child.try_wait().unwrap();
                    if exited.is_some() || Instant::now() > deadline {
                        let log = self.socket.with_file_name("cubad.log");
                        let log = std::fs::read_to_string(log).unwrap_or_default();
                        panic!("cannot connect to cubad ({exited:?}): {e}\n{log}");
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
            }
        }
    }

    /// `VmRSS` and `VmHWM` of the daemon, in KiB (0 where there is no `/proc`).
    pub fn rss_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    pub fn instance(&self) -> Option<String> {
        let t = std::fs::read_to_string(self.state.join("instance")).ok()?;
        Some(t.trim().to_string()).filter(|t| !t.is_empty())
    }
}

/// Pids of live processes whose environment carries this daemon instance's marker.
pub fn marked_pids(token: &str) -> Vec<i32> {
    let needle = format!("CUBA_EXEC_PROCESS={token}.");
    cuba_daemon::platform::proc::scan()
        .into_iter()
        .map(|p| p.pid)
        .filter(|pid| {
            cuba_daemon::platform::proc::env_entry_after(*pid, needle.as_bytes()).is_some()
        })
        .collect()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let token = self.instance();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let Some(token) = token else { return };
        remove_cgroups(&token);
        for _ in 0..100 {
            let pids = marked_pids(&token);
            if pids.is_empty() {
                // Empty now: the cgroups that `cgroup.kill` above emptied can go.
                remove_cgroups(&token);
                return;
            }
            for pid in pids {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("warning: processes of cubad instance {token} survived cleanup");
    }
}

/// Removes what a killed daemon of instance `token` left in the machine's cgroup trees
/// (`cuba-exec-<token>` and its per-process cgroups, with `CUBA_EXEC_CGROUPS=on`).
pub fn remove_cgroups(token: &str) {
    let name = format!("cuba-exec-{token}");
    let mut dirs = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = e.path();
            if !path.is_dir() {
                continue;
            }
            if e.file_name().to_string_lossy() != name {
                if depth < 4 {
                    dirs.push((path, depth + 1));
                }
                continue;
            }
            for leaf in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                let _ = std::fs::write(leaf.path().join("cgroup.kill"), "1");
                let _ = std::fs::remove_dir(leaf.path());
            }
            let _ = std::fs::remove_dir(&path);
        }
    }
}

pub fn spawn_req(command: &str) -> SpawnRequest {
    SpawnRequest {
        command: command.to_string(),
        close_stdin: true,
        ..SpawnRequest::default()
    }
}

/// Waits (long timeout, tiny output) until process `id` has exited and been drained.
pub async fn wait_exit(c: &Client, id: u64) -> ProcessInfo {
    loop {
        let w = c
            .wait(WaitRequest {
                id,
                since: None,
                spec: WaitSpec::exit(600_000, 1),
            })
            .await
            .unwrap();
        if w.reason == WaitReason::Exited {
            return w.process;
        }
    }
}

/// Spawn and wait in one `Run` request (one round trip): what `run` clients do.
pub async fn via_run(c: &Client, command: &str) -> Duration {
    let t = Instant::now();
    let running = c
        .run(RunRequest {
            spawn: spawn_req(command),
            wait: WaitSpec::exit(600_000, 1),
        })
        .await
        .unwrap();
    let w = running.result().await.unwrap();
    assert_eq!(w.reason, WaitReason::Exited, "{w:?}");
    t.elapsed()
}

/// Median, p90 and mean.
pub fn stats(mut v: Vec<Duration>) -> [Duration; 3] {
    v.sort();
    let mean = v.iter().sum::<Duration>() / v.len() as u32;
    [v[v.len() / 2], v[v.len() * 9 / 10], mean]
}

pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// A SIGKILL acknowledged at once, not when the process has ended.
pub fn kill_now(id: u64) -> SignalRequest {
    SignalRequest {
        id,
        signal: Signal::Kill,
        escalate: false,
        grace_ms: None,
        wait: false,
    }
}
