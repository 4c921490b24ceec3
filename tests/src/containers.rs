//! [`Podman`]: a test's world of container hosts, made with the real podman from the image
//! `scripts/container-image` builds (Debian bookworm, no cuba-exec inside: the product copies
//! its own build in). Every container it names is `cx-t-<pid>-<n>` (or `nope-…` for one that
//! must not exist), so tests running at once never share one, and its `Drop` removes them all
//! (`podman rm -f`), made or not, with the local daemon and what it started.
//!
//! Podman is given the containers.conf the script prints (`CONTAINERS_CONF`): Debian's podman
//! needs runc and no default ulimits on these machines. Product processes get it through
//! [`Podman::env`], with the world's `config.toml`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::{machine, procfs, sshd::output_within, TestDaemon};

/// The image the tests' containers are made from (`scripts/container-image` makes it).
pub const IMAGE: &str = "localhost/cuba-exec-test:bookworm";
/// What the image script needs; without them the tests are skipped (a failure under CI).
const TOOLS: [&str; 3] = ["podman", "runc", "mmdebstrap"];
/// How long one engine command, or a client command that makes a container and copies the
/// build into it, may take: podman is slow on a loaded 2-core machine, and a stuck one fails.
pub const ENGINE_STEP: Duration = Duration::from_secs(60);
/// The first run of the image script builds a root file system (about 25 s unloaded).
const IMAGE_BUILD: Duration = Duration::from_secs(600);

/// Containers named by this test process so far (the `<n>` of `cx-t-<pid>-<n>`).
static NAMED: AtomicUsize = AtomicUsize::new(0);

pub struct Podman {
    /// The local side: a private (0700) dir with the socket, state and `config.toml`; its
    /// guard kills the daemon a client starts here and what that daemon started.
    local: TestDaemon,
    /// The containers.conf podman must be given here.
    conf: PathBuf,
    config: PathBuf,
    text: String,
    /// Every container name handed out: removed on drop whether or not it was made.
    names: Vec<String>,
}

/// The containers.conf, or why the image cannot be had here (missing tools): made once per
/// test process.
fn image() -> &'static Result<PathBuf, String> {
    static CONF: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    CONF.get_or_init(|| {
        let missing: Vec<&str> = TOOLS.into_iter().filter(|t| !on_path(t)).collect();
        if !missing.is_empty() {
            return Err(format!(
                "{} missing (apt-get install podman runc mmdebstrap)",
                missing.join(", ")
            ));
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/container-image");
        // One build at a time across test processes: the script's files are not for two.
        let lock = std::env::temp_dir().join("cuba-tests-container-image.lock");
        let lock = std::fs::File::create(&lock).expect("the image lock file");
        // SAFETY: flock(2) on a descriptor this function owns; released when `lock` closes.
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
        let out = output_within(Command::new(&script), IMAGE_BUILD)
            .unwrap_or_else(|| panic!("{} did not finish in {IMAGE_BUILD:?}", script.display()));
        assert!(
            out.status.success(),
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        remove_stale(&conf);
        Ok(conf)
    })
}

fn on_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(program).is_file())
}

/// Containers of test processes that were killed before their guards ran (their pid is gone,
/// or is this process's, which has named none yet): a later run could reuse their names.
fn remove_stale(conf: &Path) {
    let mut ps = podman_cmd(conf);
    ps.args([
        "ps",
        "-a",
        "--filter",
        "name=^cx-t-",
        "--format",
        "{{.Names}}",
    ]);
    let Some(out) = output_within(ps, ENGINE_STEP) else {
        return;
    };
    let me = std::process::id() as i32;
    let stale: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|name| {
            let pid = name.split('-').nth(2).and_then(|p| p.parse::<i32>().ok());
            pid.is_some_and(|pid| pid == me || !procfs::pid_alive(pid))
        })
        .map(String::from)
        .collect();
    if !stale.is_empty() {
        remove(conf, &stale);
    }
}

fn podman_cmd(conf: &Path) -> Command {
    let mut cmd = Command::new("podman");
    cmd.env("CONTAINERS_CONF", conf);
    cmd
}

/// `podman rm -f -t 0 NAMES…`, errors ignored (a name never made is fine).
fn remove(conf: &Path, names: &[String]) {
    let mut rm = podman_cmd(conf);
    rm.args(["rm", "-f", "-i", "-t", "0"]).args(names);
    let _ = output_within(rm, ENGINE_STEP);
}

impl Podman {
    /// A world with no host yet; `None` (the test returns) when podman or the image tools are
    /// missing here, said as a skip.
    pub fn new() -> Option<Podman> {
        let conf = match image() {
            Ok(conf) => conf.clone(),
            Err(why) => {
                machine::skip("container hosts", why);
                return None;
            }
        };
        let local = TestDaemon::builder().on_demand();
        let config = local.dir().join("config.toml");
        std::fs::write(&config, "").expect("the config file");
        Some(Podman {
            local,
            conf,
            config,
            text: String::new(),
            names: Vec::new(),
        })
    }

    /// The local side (its socket, state and guard).
    pub fn local(&self) -> &TestDaemon {
        &self.local
    }

    /// The containers.conf to give podman (`CONTAINERS_CONF`).
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// The world's `config.toml` (`CUBA_EXEC_CONFIG`).
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// A container name no other test uses, `PREFIX-<pid>-<n>` style, removed on drop.
    fn name(&mut self, prefix: &str) -> String {
        let n = NAMED.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        self.names.push(name.clone());
        name
    }

    fn add(&mut self, host: &str, keys: &str) {
        let _ = write!(self.text, "\n[hosts.{host}]\nengine = \"podman\"\n{keys}");
        std::fs::write(&self.config, &self.text).expect("the config file");
    }

    /// `[hosts.HOST]` made from [`IMAGE`] on first use; returns the container's name.
    pub fn image_host(&mut self, host: &str) -> String {
        let name = self.name("cx-t");
        self.add(host, &format!("image = {IMAGE:?}\ncontainer = {name:?}\n"));
        name
    }

    /// `[hosts.HOST]` naming a container started here (`sleep infinity`, no cuba-exec in it):
    /// an existing one, not made by the product; returns its name.
    pub async fn existing_host(&mut self, host: &str) -> String {
        let name = self.name("cx-t");
        let out = self
            .podman(&["run", "-d", "--name", &name, IMAGE, "sleep", "infinity"])
            .await;
        assert!(out.status.success(), "podman run {name}: {}", said(&out));
        self.add(host, &format!("container = {name:?}\n"));
        name
    }

    /// `[hosts.HOST]` naming a container that does not exist; returns its name.
    pub fn missing_host(&mut self, host: &str) -> String {
        let name = self.name("nope-cx-t");
        self.add(host, &format!("container = {name:?}\n"));
        name
    }

    /// What a product process (`cubactl`, `cuba-exec`) of this world needs besides the local
    /// side's socket and state: podman's configuration and the hosts.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("CONTAINERS_CONF", self.conf.clone().into()),
            ("CUBA_EXEC_CONFIG", self.config.clone().into()),
        ]
    }

    /// `cubactl ARGS` in this world (killed if dropped, stdin closed).
    pub fn cubactl(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = self.local.client_command(crate::bin("cubactl"));
        cmd.args(args)
            .envs(self.env())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        cmd
    }

    /// Runs `cubactl ARGS` to its end, bounded by [`ENGINE_STEP`].
    pub async fn ctl(&self, args: &[&str]) -> Output {
        let what = format!("cubactl {}", args.join(" "));
        crate::bounded(&what, ENGINE_STEP, self.cubactl(args).output())
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    /// [`Podman::ctl`] that must succeed; its stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args).await;
        assert!(
            out.status.success(),
            "cubactl {}: {}",
            args.join(" "),
            said(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `podman ARGS` to its end (bounded), with this machine's containers.conf.
    pub async fn podman(&self, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::from(podman_cmd(&self.conf));
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let what = format!("podman {}", args.join(" "));
        crate::bounded(&what, ENGINE_STEP, cmd.output())
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    /// `podman stop -t 0 NAME`: killed at once, as a crash or an OOM would.
    pub async fn stop(&self, name: &str) {
        let out = self.podman(&["stop", "-t", "0", name]).await;
        assert!(out.status.success(), "podman stop {name}: {}", said(&out));
    }

    /// The container's state as podman says it (`running`, `exited`, …).
    pub async fn status(&self, name: &str) -> String {
        let out = self
            .podman(&[
                "container",
                "inspect",
                "--format",
                "{{.State.Status}}",
                name,
            ])
            .await;
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Whether `path` is an executable file inside container `name`.
    pub async fn has_file(&self, name: &str, path: &str) -> bool {
        self.podman(&["exec", name, "test", "-x", path])
            .await
            .status
            .success()
    }

    /// How many clients the daemon inside `name` has, this question's own included (asked
    /// with the copy of cubactl inside, not through a bridge).
    pub async fn clients_inside(&self, name: &str) -> u64 {
        let bin = format!("{}/cubactl", cuba_protocol::hosts::COPY_DIR);
        let out = self
            .podman(&["exec", name, &bin, "daemon", "status", "--json"])
            .await;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("daemon status in {name}: {e}: {}", said(&out)));
        v["clients"].as_u64().unwrap_or(0)
    }
}

/// A command's status and both streams, for failure messages.
pub fn said(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl Drop for Podman {
    fn drop(&mut self) {
        remove(&self.conf, &self.names);
        // A bridge whose cubactl was SIGKILLed outlives it until its container goes: gone now,
        // unless the engine left it hanging.
        for name in &self.names {
            for pid in procfs::with_cmdline(name) {
                let cmdline = procfs::cmdline(pid);
                if cmdline
                    .split(' ')
                    .next()
                    .is_some_and(|p| p.ends_with("podman"))
                {
                    procfs::kill9(pid);
                }
            }
        }
        // The local daemon (`ps --all-hosts`, `hosts` start one) and its processes: the
        // guard's own drop, after this.
    }
}
