//! [`SshServer`]: a real OpenSSH `sshd` on 127.0.0.1 with keys of its own, and a client config
//! file through which the product reaches it as `ssh -F <config> ALIAS`, as it reaches a real
//! host: the host tests then run the product's own `ssh` invocations, not a stand-in.
//!
//! Nothing of the machine's SSH setup is used: the host key, the client key, `authorized_keys`,
//! `known_hosts` and both config files live in a short temp dir, and the server listens on a
//! free port of the loopback address only.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::procfs;

/// Where Debian's `openssh-server` installs the server (`.ci/run` installs it when missing).
pub const SSHD: &str = "/usr/sbin/sshd";
/// How long a starting `sshd` may take to say it listens (generous, as for the test daemons: a
/// busy 2-core machine can be slow, and a server that never listens still fails).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Starts tried when the free port was taken between our probe and sshd's bind.
const BIND_ATTEMPTS: usize = 5;
/// What `AcceptEnv` lets through: a `SetEnv` of another name would be dropped silently.
const ACCEPTED_ENV: [&str; 2] = ["CUBA_EXEC_", "CUBA_TEST_"];

/// A running `sshd` owned by one test; `Drop` SIGKILLs it and what its sessions run.
///
/// Each connection is served by an sshd child that calls `setsid`, and each remote command
/// runs in a session of its own too: killing sshd's process group reaches neither, and a remote
/// command outlives its client and the server alike (reparented to init). So `Drop` kills the
/// listener's children first, then every process whose `SSH_CONNECTION` names this port; only
/// a remote process that cleared its environment escapes.
#[derive(Debug)]
pub struct SshServer {
    dir: TempDir,
    port: u16,
    child: Child,
    /// The client config, `ssh_config` in the temp dir.
    config: PathBuf,
    /// The user `ssh` logs in as: the one running the tests, whose key sshd was given.
    user: String,
    /// Every alias of the client config, in order, each with its `Host` block.
    hosts: Mutex<Vec<(String, String)>>,
}

impl SshServer {
    /// Generates the keys and configs in a new temp dir and starts `sshd` on a free port,
    /// returning once it has said that it listens.
    pub fn start() -> SshServer {
        assert!(
            Path::new(SSHD).is_file(),
            "sshd not found at {SSHD}: install openssh-server (.ci/run does)"
        );
        let dir = tempfile::Builder::new()
            .prefix("cs-")
            // Private, as the daemon requires of its socket and state directories.
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in("/tmp")
            .expect("cannot create a temp dir in /tmp");
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        fs::copy(d.join("client_key.pub"), d.join("authorized_keys"))
            .expect("cannot write authorized_keys");
        let config = d.join("ssh_config");
        fs::write(&config, "").expect("cannot write the client config");
        privsep_dir();
        for _ in 0..BIND_ATTEMPTS {
            let port = free_port();
            write_server_files(d, port);
            if let Some(child) = launch(d, port) {
                return SshServer {
                    port,
                    child,
                    config,
                    user: user_name(),
                    hosts: Mutex::new(Vec::new()),
                    dir,
                };
            }
        }
        panic!(
            "sshd found no free port in {BIND_ATTEMPTS} starts; log:\n{}",
            read_log(d)
        );
    }

    /// The port sshd listens on (at 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temp dir of the keys, configs and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The client config, for `ssh -F <path> ALIAS`: the aliases of [`SshServer::add_host`].
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// Where sshd's stderr (and that of its per-connection children) goes.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("sshd.log")
    }

    /// Everything sshd has logged so far, for failure messages.
    pub fn log(&self) -> String {
        read_log(self.dir.path())
    }

    /// Adds (or replaces) `alias` in the client config: this server, as the current user with
    /// the client key, and `set_env` sent as `SetEnv` (names `CUBA_EXEC_*` or `CUBA_TEST_*`,
    /// the only ones sshd accepts; values absolute paths without spaces or quotes, which the
    /// config file holds unquoted).
    pub fn add_host(&self, alias: &str, set_env: &[(&str, &str)]) {
        let mut lines = self.host_lines(self.port);
        for (name, value) in set_env {
            assert!(
                ACCEPTED_ENV.iter().any(|p| name.starts_with(p))
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "SetEnv {name}: sshd accepts only CUBA_EXEC_* and CUBA_TEST_* names"
            );
            assert!(
                value.starts_with('/')
                    && !value.contains(|c: char| c.is_whitespace() || "\"'\\".contains(c)),
                "SetEnv {name}={value:?}: an absolute path without spaces or quotes is expected"
            );
        }
        if !set_env.is_empty() {
            let pairs: Vec<String> = set_env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            lines.push(format!("SetEnv {}", pairs.join(" ")));
        }
        self.put_host(alias, lines);
    }

    /// Adds (or replaces) `alias` as the way to `remote`: its socket and state dir go with the
    /// session, so `cubactl bridge` there reaches that daemon, as on another machine.
    pub fn add_daemon_host(&self, alias: &str, remote: &crate::TestDaemon) {
        let socket = remote.socket().display().to_string();
        let state = remote.state_dir().display().to_string();
        let env = [
            ("CUBA_EXEC_SOCKET", &socket[..]),
            ("CUBA_EXEC_STATE_DIR", &state[..]),
        ];
        self.add_host(alias, &env);
    }

    /// Adds (or replaces) `alias` as a host whose port is closed: `ssh` fails at once with
    /// "Connection refused" (exit 255), and `ConnectTimeout` bounds it should the port drop
    /// packets instead.
    pub fn add_unreachable_host(&self, alias: &str) {
        // Nothing listens on a port just released, unless another process binds it meanwhile.
        let mut lines = self.host_lines(free_port());
        lines.push("ConnectTimeout 3".to_string());
        self.put_host(alias, lines);
    }

    /// `ssh -F <config> ALIAS REMOTE`, bounded by [`crate::STEP`] (failing the test with the
    /// server's log if it takes longer).
    pub fn ssh(&self, alias: &str, remote: &str) -> Output {
        let mut cmd = Command::new("ssh");
        cmd.arg("-F").arg(&self.config).arg(alias).arg(remote);
        output_within(cmd, crate::STEP).unwrap_or_else(|| {
            panic!(
                "timed out after {:?}: ssh {alias} {remote:?}; sshd log:\n{}",
                crate::STEP,
                self.log()
            )
        })
    }

    /// The lines of a `Host` block for 127.0.0.1:`port`, nothing from the user's own setup
    /// (no agent keys, no known hosts, no prompts, no shared connections).
    fn host_lines(&self, port: u16) -> Vec<String> {
        let d = self.dir.path();
        vec![
            "HostName 127.0.0.1".to_string(),
            format!("Port {port}"),
            format!("User {}", self.user),
            format!("IdentityFile {}", d.join("client_key").display()),
            "IdentitiesOnly yes".to_string(),
            format!("UserKnownHostsFile {}", d.join("known_hosts").display()),
            "GlobalKnownHostsFile /dev/null".to_string(),
            "StrictHostKeyChecking yes".to_string(),
            "BatchMode yes".to_string(),
            "LogLevel ERROR".to_string(),
            "ControlMaster no".to_string(),
        ]
    }

    /// Puts `alias` with `lines` in the list and rewrites the client config from it.
    fn put_host(&self, alias: &str, lines: Vec<String>) {
        assert!(
            !alias.is_empty() && !alias.contains(|c: char| c.is_whitespace() || "*?!,".contains(c)),
            "{alias:?} is no plain host alias"
        );
        let mut block = format!("Host {alias}\n");
        for line in lines {
            block.push_str(&format!("    {line}\n"));
        }
        let mut hosts = self
            .hosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        hosts.retain(|(a, _)| a != alias);
        hosts.push((alias.to_string(), block));
        let text: Vec<&str> = hosts.iter().map(|(_, b)| b.as_str()).collect();
        // Renamed into place: an `ssh` reading the config meanwhile sees all of one version.
        let new = self.dir.path().join("ssh_config.new");
        fs::write(&new, text.join("\n")).expect("cannot write the client config");
        fs::rename(&new, &self.config).expect("cannot rename the client config into place");
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let listener = self.child.id() as i32;
        // Found while they are still the listener's children.
        let connections: Vec<i32> = procfs::all_pids()
            .into_iter()
            .filter(|p| procfs::parent(*p) == Some(listener))
            .collect();
        kill_group(&mut self.child);
        connections.into_iter().for_each(procfs::kill9);
        // "client-ip client-port server-ip server-port", in every remote process's environment.
        let marker = format!(" 127.0.0.1 {}", self.port);
        // Processes fork while they are killed: repeat until a scan finds none.
        for _ in 0..50 {
            let left = procfs::with_env_entry(|kv| {
                kv.starts_with(b"SSH_CONNECTION=") && kv.ends_with(marker.as_bytes())
            });
            if left.is_empty() {
                break;
            }
            left.into_iter().for_each(procfs::kill9);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Runs `cmd` (stdin closed, output collected) in a process group of its own; `None` when it
/// was still running after `limit`, the group then SIGKILLed.
pub fn output_within(mut cmd: Command, limit: Duration) -> Option<Output> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(limit) {
        Ok(out) => Some(out.unwrap_or_else(|e| panic!("waiting for {program} failed: {e}"))),
        Err(_) => {
            // SAFETY: killpg(2) with a plain pid; the waiting thread reaps the leader.
            unsafe { libc::killpg(pid, libc::SIGKILL) };
            let _ = rx.recv_timeout(Duration::from_secs(5));
            None
        }
    }
}

/// `ssh-keygen` of an ed25519 key without passphrase at `path` (and `path.pub`).
fn keygen(path: &Path) {
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-N", "", "-t", "ed25519", "-C", "cuba-tests", "-f"])
        .arg(path);
    let out = output_within(cmd, crate::STEP).expect("ssh-keygen did not finish in time");
    assert!(
        out.status.success(),
        "ssh-keygen -f {} failed ({}): {}",
        path.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // ssh and sshd refuse a private key others may read; ssh-keygen's mode, made explicit.
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .expect("cannot set the key's mode");
}

/// Run as root, sshd will not start without its privilege-separation directory, which the
/// service's unit makes at boot (and a container never ran). Run as another user, it needs
/// none.
fn privsep_dir() {
    let dir = Path::new("/run/sshd");
    if !nix::unistd::geteuid().is_root() || dir.is_dir() {
        return;
    }
    match fs::create_dir(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
            .expect("cannot set the mode of /run/sshd"),
        // Another test's server made it meanwhile.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("cannot create /run/sshd, which sshd needs as root: {e}"),
    }
}

/// The name of the user running the tests: the one sshd logs in, as its key is theirs.
fn user_name() -> String {
    match nix::unistd::User::from_uid(nix::unistd::getuid()) {
        Ok(Some(user)) => user.name,
        _ => std::env::var("USER").expect("no passwd entry for this uid and no $USER"),
    }
}

/// A port of 127.0.0.1 nobody listened on a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("cannot bind a listener on 127.0.0.1")
        .port()
}

/// `known_hosts` (the host key at `[127.0.0.1]:port`) and `sshd_config` for `port`.
fn write_server_files(d: &Path, port: u16) {
    let public = fs::read_to_string(d.join("host_key.pub")).expect("cannot read the host key");
    let key: Vec<&str> = public.split_whitespace().take(2).collect();
    fs::write(
        d.join("known_hosts"),
        format!("[127.0.0.1]:{port} {}\n", key.join(" ")),
    )
    .expect("cannot write known_hosts");
    let at = |name: &str| d.join(name).display().to_string();
    let config = format!(
        "ListenAddress 127.0.0.1\n\
         Port {port}\n\
         HostKey {}\n\
         AuthorizedKeysFile {}\n\
         PidFile {}\n\
         StrictModes no\n\
         UsePAM no\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\n\
         AcceptEnv CUBA_EXEC_* CUBA_TEST_*\n\
         PermitUserEnvironment no\n\
         PrintMotd no\n\
         PrintLastLog no\n\
         LogLevel VERBOSE\n\
         MaxStartups 100\n\
         MaxSessions 100\n",
        at("host_key"),
        at("authorized_keys"),
        at("sshd.pid"),
    );
    fs::write(d.join("sshd_config"), config).expect("cannot write sshd_config");
}

/// Starts sshd on `port` and waits for its "Server listening" line: `None` when it could not
/// bind the port (taken since [`free_port`]), a panic with its log for any other failure.
fn launch(d: &Path, port: u16) -> Option<Child> {
    let mut child = Command::new(SSHD)
        .arg("-D")
        .arg("-e")
        .arg("-f")
        .arg(d.join("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("cannot start sshd");
    let stderr = child.stderr.take().expect("sshd's stderr is piped");
    let lines = drain(stderr, &d.join("sshd.log"));
    let ready = format!("Server listening on 127.0.0.1 port {port}.");
    let deadline = Instant::now() + START_TIMEOUT;
    let mut port_taken = false;
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line == ready => return Some(child),
            Ok(line) => port_taken |= line.contains("Address already in use"),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                kill_group(&mut child);
                panic!(
                    "sshd did not listen on port {port} within {START_TIMEOUT:?}; log:\n{}",
                    read_log(d)
                );
            }
            // Its stderr closed: sshd has exited.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = kill_group(&mut child);
                if port_taken {
                    return None;
                }
                panic!(
                    "sshd exited at start-up on port {port} ({status:?}); log:\n{}",
                    read_log(d)
                );
            }
        }
    }
}

/// A thread that appends sshd's stderr to `log` as long as sshd (or a per-connection child)
/// writes it, so that sshd never blocks on a full pipe; the returned channel has each line
/// (until it is dropped), for the start to wait on.
fn drain(stderr: ChildStderr, log: &Path) -> mpsc::Receiver<String> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("cannot open the sshd log");
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("sshd-stderr".to_string())
        .spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut buf = Vec::new();
            while matches!(reader.read_until(b'\n', &mut buf), Ok(1..)) {
                // sshd ends its stderr lines with "\r\n".
                let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                buf.clear();
                let _ = writeln!(file, "{line}");
                let _ = tx.send(line);
            }
        })
        .expect("cannot start the sshd log thread");
    rx
}

fn read_log(d: &Path) -> String {
    fs::read_to_string(d.join("sshd.log")).unwrap_or_default()
}

/// SIGKILLs `child`'s process group (sshd and what it forked without `setsid`) and reaps it.
fn kill_group(child: &mut Child) -> Option<std::process::ExitStatus> {
    // SAFETY: killpg(2) with a plain pid, the group leader we started and have not reaped.
    unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
    child.wait().ok()
}
