//! Test harness: a private daemon per test (the end-to-end suite's [`TestDaemon`], started by
//! the first `cubactl` that needs it, and its guard that kills it and everything it ran),
//! `cubactl` aimed at it, and bounded waits driven by events (a pidfd or kqueue, pipes).

#![allow(dead_code)]

use std::ffi::OsString;
use std::io::Read;
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{ClientInfo, ClientKind};
use cuba_tests::TestDaemon;

mod procs;
// Not every test binary uses both.
#[allow(unused_imports)]
pub use procs::{alive, exited_within};

/// Upper bound for anything a test waits for.
pub const LIMIT: Duration = Duration::from_secs(30);

pub fn cubactl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cubactl"))
}

/// One test's daemon world, with `cubactl` aimed at it; the rest (its dir, socket, state dir
/// and log) is the shared [`TestDaemon`]'s, which it derefs to. Dropping it kills the daemon
/// and every process it started.
pub struct Env(TestDaemon);

impl Env {
    pub fn new() -> Env {
        Env(TestDaemon::builder().grace("500ms").on_demand())
    }

    /// The environment of a `cubactl` of this world.
    pub fn vars(&self) -> Vec<(String, OsString)> {
        self.0.client_env()
    }

    /// `cubactl` for assert_cmd, bounded by [`LIMIT`].
    pub fn cmd(&self) -> assert_cmd::Command {
        let mut c = assert_cmd::Command::from_std(self.0.client_command(cubactl_bin()));
        c.env_remove("NO_COLOR").env_remove("COLUMNS");
        c.timeout(LIMIT);
        c
    }

    /// `cubactl` as a plain child process (for signals, pipes and terminals).
    pub fn std_cmd(&self) -> std::process::Command {
        let mut c = self.0.client_command(cubactl_bin());
        c.env_remove("NO_COLOR")
            .env_remove("COLUMNS")
            .stdin(Stdio::null());
        c
    }

    /// Runs cubactl with `args`; panics unless it exits 0. Returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().expect("run cubactl");
        assert!(
            out.status.success(),
            "cubactl {args:?} failed: {}\ndaemon log:\n{}",
            show(&out),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs cubactl with `args` and gives the whole output, whatever the exit code.
    pub fn output(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run cubactl")
    }

    /// `cubactl start …` and the new id.
    pub fn start(&self, args: &[&str]) -> u64 {
        let mut all = vec!["start"];
        all.extend_from_slice(args);
        let out = self.ok(&all);
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("start printed {out:?}"))
    }

    /// `cubactl ps --json` as JSON.
    pub fn ps(&self) -> Vec<serde_json::Value> {
        serde_json::from_str(&self.ok(&["ps", "--json"])).expect("ps --json is JSON")
    }

    pub fn row(&self, id: u64) -> serde_json::Value {
        self.ps()
            .into_iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("process {id} is not in ps --json"))
    }

    /// A second connection, acting as an agent through the MCP shim would.
    pub async fn agent(&self) -> Result<Client, ClientError> {
        let me = ClientInfo {
            kind: ClientKind::Mcp,
            name: "agent".into(),
            pid: std::process::id(),
            cwd: "/".into(),
            env: std::env::vars_os().collect(),
        };
        Client::connect(self.socket(), me).await
    }
}

impl Deref for Env {
    type Target = TestDaemon;

    fn deref(&self) -> &TestDaemon {
        &self.0
    }
}

pub fn show(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits for a child to exit, at most [`LIMIT`]; kills it and panics on timeout.
pub fn wait_child(child: &mut Child) -> ExitStatus {
    if !exited_within(child.id() as i32, LIMIT) {
        let _ = child.kill();
        panic!("cubactl (pid {}) did not exit within {LIMIT:?}", child.id());
    }
    child.wait().expect("wait for cubactl")
}

/// Collects what a pipe or terminal produces, on a thread, so a test can wait for a text.
pub struct Collector {
    rx: mpsc::Receiver<Vec<u8>>,
    pub seen: Vec<u8>,
    closed: bool,
}

impl Collector {
    pub fn new(mut source: impl Read + Send + 'static) -> Collector {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // A terminal's master side reports EIO once the other side is closed: that is EOF.
            while let Ok(n) = source.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Collector {
            rx,
            seen: Vec::new(),
            closed: false,
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Waits until the output so far contains `needle`; panics after [`LIMIT`].
    pub fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + LIMIT;
        while !self.text().contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(data) => self.seen.extend(data),
                Err(_) => panic!("never saw {needle:?}; got {:?}", self.text()),
            }
        }
    }

    /// Everything until the source closes (bounded by [`LIMIT`]).
    pub fn finish(&mut self) -> String {
        let deadline = Instant::now() + LIMIT;
        while !self.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(data) => self.seen.extend(data),
                Err(mpsc::RecvTimeoutError::Disconnected) => self.closed = true,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("output never ended; got {:?}", self.text())
                }
            }
        }
        self.text()
    }
}

/// `cubactl ARGS` on a fresh pseudo-terminal of `cols` x `rows`, as a person at a terminal
/// runs it: stdin, stdout and stderr are the terminal.
pub struct OnPty {
    pub child: Child,
    /// What the terminal shows (read from its master side).
    pub screen: Collector,
    /// The keyboard: what is written here is typed.
    pub keyboard: std::fs::File,
    /// The terminal's own side, to look at its modes.
    pub tty: std::fs::File,
    /// Its modes before cubactl started: what it must leave (read after the start, cubactl
    /// may already have changed them).
    pub initial: nix::sys::termios::Termios,
}

impl OnPty {
    pub fn spawn(env: &Env, args: &[&str], cols: u16, rows: u16) -> OnPty {
        let size = nix::pty::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).expect("openpty");
        let slave = std::fs::File::from(pty.slave);
        let initial = nix::sys::termios::tcgetattr(&slave).expect("tcgetattr");
        let child = env
            .std_cmd()
            .args(args)
            .stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave.try_clone().expect("dup")))
            .stderr(Stdio::from(slave.try_clone().expect("dup")))
            .spawn()
            .expect("cubactl");
        let keyboard = std::fs::File::from(pty.master);
        let screen = Collector::new(keyboard.try_clone().expect("dup"));
        OnPty {
            child,
            screen,
            keyboard,
            tty: slave,
            initial,
        }
    }

    pub fn typed(&mut self, keys: &[u8]) {
        std::io::Write::write_all(&mut self.keyboard, keys).expect("type");
    }

    /// The terminal's modes now.
    pub fn modes(&self) -> nix::sys::termios::Termios {
        nix::sys::termios::tcgetattr(&self.tty).expect("tcgetattr")
    }

    /// Makes the terminal `cols` x `rows`, as a window resize does, and tells cubactl (it
    /// does not have this terminal as its controlling terminal, so the kernel would not).
    pub fn resize(&self, cols: u16, rows: u16) {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize from the struct we pass, on an open fd.
        let rc = unsafe { libc::ioctl(self.keyboard.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(rc, 0, "TIOCSWINSZ");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGWINCH,
        )
        .expect("SIGWINCH");
    }
}

/// Asserts that two sets of terminal modes are the same.
pub fn same_modes(a: &nix::sys::termios::Termios, b: &nix::sys::termios::Termios) {
    assert_eq!(a.input_flags, b.input_flags);
    assert_eq!(a.output_flags, b.output_flags);
    assert_eq!(a.control_flags, b.control_flags);
    assert_eq!(a.local_flags, b.local_flags);
    assert_eq!(a.control_chars, b.control_chars);
}

/// The matched line of `cubactl wait ID --until REGEX`.
pub fn wait_line(env: &Env, id: u64, regex: &str) -> String {
    let ids = id.to_string();
    let out = env.output(&["wait", &ids, "--until", regex, "--timeout", "20s"]);
    // What the process had written, for a wait that ended otherwise.
    assert!(
        out.status.success(),
        "waiting for {regex:?}: {}\nprocess {id} wrote: {:?}",
        show(&out),
        String::from_utf8_lossy(&env.output(&["logs", &ids]).stdout)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}
