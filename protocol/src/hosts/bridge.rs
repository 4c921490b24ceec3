//! Reaching a host: its bridge command started with piped stdio, the protocol's handshake
//! through it, and a failure turned into what the user should do (install ssh, fix the host,
//! install `cubactl` there, upgrade one side).

use std::ffi::OsString;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, Command};
use tokio::sync::{oneshot, watch};

use super::{Bridge, HostSpec};
use crate::client::{Client, ClientError};
use crate::handshake::HandshakeError;
use crate::message::{ClientInfo, Hello};

/// The whole first connection: an ssh handshake, and perhaps a daemon started there.
const BRIDGE_HANDSHAKE: Duration = Duration::from_secs(30);
/// How long a bridge that closed its stdout may take to exit, for its status in the error.
const EXIT_WAIT: Duration = Duration::from_secs(5);
/// The bridge's last stderr lines kept for error messages.
const STDERR_LINES: usize = 8;
const STDERR_LINE_BYTES: usize = 512;

/// The variables of a client's environment that narrow a daemon's policy: the only ones sent
/// to another machine (the rest of this machine's environment means nothing there).
pub const NARROWING: &[&str] = &[
    "CUBA_EXEC_BLOCKED_COMMANDS",
    "CUBA_EXEC_ALLOWED_COMMANDS",
    "CUBA_EXEC_ALLOWED_DIRS",
    "CUBA_EXEC_SANDBOX",
    "CUBA_EXEC_NETWORK",
];

/// `client` as a remote daemon should see it: named after this machine too, its policy
/// narrowing as its only environment, the host's `cwd` (or none: the remote home).
pub fn remote_hello(mut client: ClientInfo, spec: &HostSpec) -> Hello {
    client.env.retain(|(k, _)| NARROWING.iter().any(|n| k == n));
    client.cwd = spec.cwd.clone().map(OsString::from).unwrap_or_default();
    if let Some(me) = hostname() {
        client.name = format!("{}@{me}", client.name);
    }
    Hello {
        client,
        remote: true,
    }
}

/// This machine's name (`gethostname`).
#[cfg(unix)]
pub fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // fails.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0)?;
    (rc == 0 && end > 0).then(|| String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// This machine's name (`%COMPUTERNAME%`).
#[cfg(windows)]
pub fn hostname() -> Option<String> {
    std::env::var("COMPUTERNAME").ok().filter(|n| !n.is_empty())
}

/// The bridge process, for as long as its connection lives: dropping this (with the last
/// clone of the [`Client`]) kills it.
struct Process {
    _kill: oneshot::Sender<()>,
}

/// The bridge's last stderr lines.
#[derive(Default)]
struct Tail(Mutex<Vec<String>>);

impl Tail {
    fn push(&self, line: &str) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == STDERR_LINES {
            lines.remove(0);
        }
        let mut line = line.trim_end().to_string();
        if line.len() > STDERR_LINE_BYTES {
            let mut cut = STDERR_LINE_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        lines.push(line);
    }

    /// The last line that says something (ssh's own reason, the remote shell's error).
    fn last(&self) -> Option<String> {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().rev().find(|l| !l.trim().is_empty()).cloned()
    }
}

/// Reads the bridge's stderr to its end, so it never blocks on a full pipe; keeps the last
/// lines.
async fn drain(stderr: ChildStderr, tail: Arc<Tail>, host: String) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(%host, "bridge: {line}");
        tail.push(&line);
    }
}

fn failed(spec: &HostSpec, message: String) -> ClientError {
    ClientError::Bridge {
        host: spec.name.clone(),
        message,
    }
}

/// Starts `spec`'s bridge and says hello through it; a container host is made ready first
/// (`first`: see [`super::container::prepare`]).
pub async fn connect(spec: &HostSpec, hello: Hello, first: bool) -> Result<Client, ClientError> {
    let bin = match &spec.bridge {
        Bridge::Container(c) => Some(
            super::container::prepare(c, spec.remote_bin.as_deref(), first)
                .await
                .map_err(|e| failed(spec, e))?,
        ),
        _ => None,
    };
    let argv = spec.argv(bin.as_deref());
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| failed(spec, "no bridge command".into()))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group: a Ctrl-C meant for a command run through it (`cubactl run`)
    // must not end the link.
    #[cfg(unix)]
    cmd.process_group(0);
    #[cfg(windows)]
    cmd.creation_flags(0x0000_0200); // CREATE_NEW_PROCESS_GROUP
    let mut child = cmd
        .spawn()
        .map_err(|e| failed(spec, spawn_error(spec, program, &e)))?;
    // Its own group leader: its pid names the group.
    let pgid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(failed(spec, "the bridge's stdio is missing".into()));
    };
    let tail = Arc::new(Tail::default());
    let mut drained = tokio::spawn(drain(stderr, tail.clone(), spec.name.clone()));
    let (kill, killed) = oneshot::channel::<()>();
    let (exit_tx, mut exit) = watch::channel::<Option<ExitStatus>>(None);
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => status,
            _ = killed => {
                // The whole group: what the bridge started (ssh's helpers, a `sleep &` of a
                // wrapper script) must not outlive it, nor keep its stderr open.
                kill_group(child.id());
                let _ = child.start_kill();
                child.wait().await
            }
        };
        // Ended by itself: what it left in its group goes too.
        kill_group(pgid);
        let _ = exit_tx.send(status.ok());
    });
    let keep = Arc::new(Process { _kill: kill });
    #[cfg(unix)]
    let pipe = std::os::fd::AsFd::as_fd(&stdin).try_clone_to_owned().ok();
    // Windows cannot count what is left in a pipe from its write end.
    #[cfg(windows)]
    let pipe = None;
    let stream = tokio::io::join(stdout, stdin);
    let limit = handshake_limit();
    let peer = crate::client::Peer {
        name: format!("the link to host {}", spec.name),
        stall: Some(limit),
        pipe,
    };
    match Client::over(stream, hello, Some(keep.clone()), limit, peer).await {
        Ok(client) => Ok(client),
        Err(e) => {
            // A bridge that closed its stdout is ending by itself: its own exit status says
            // why. Any other is killed now (its status would only be our kill).
            if !matches!(e, ClientError::Closed) {
                drop(keep);
            }
            let status = tokio::time::timeout(EXIT_WAIT, exit.wait_for(Option::is_some))
                .await
                .ok()
                .and_then(|s| s.ok().and_then(|s| *s));
            // Its last words: the bridge has exited, so its stderr ends soon.
            let _ = tokio::time::timeout(EXIT_WAIT, &mut drained).await;
            // A container that stopped during the handshake: that is the reason, not the
            // engine's exit.
            if let Bridge::Container(c) = &spec.bridge {
                if let Some(why) = super::container::stopped(c).await {
                    return Err(failed(spec, why));
                }
            }
            Err(failed(spec, explain(spec, e, (status, limit), tail.last())))
        }
    }
}

/// SIGKILL to process group `pgid` (the bridge's), if it still has one.
#[cfg(unix)]
fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid.and_then(|p| libc::pid_t::try_from(p).ok()) {
        // SAFETY: a signal to a group this client made (the bridge leads it); a group that
        // is gone is ESRCH, which is fine.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
}

/// Windows has no process groups to kill: the bridge itself is killed (`kill_on_drop`); what
/// it started is left to its own ending when its pipes close.
#[cfg(windows)]
fn kill_group(_: Option<u32>) {}

/// How long a bridge may take to answer the handshake: `CUBA_EXEC_BRIDGE_TIMEOUT` (seconds,
/// or `500ms`), else [`BRIDGE_HANDSHAKE`] (an ssh handshake, perhaps a daemon start there).
fn handshake_limit() -> Duration {
    let Ok(text) = std::env::var("CUBA_EXEC_BRIDGE_TIMEOUT") else {
        return BRIDGE_HANDSHAKE;
    };
    let t = text.trim();
    let parsed = match t.strip_suffix("ms") {
        Some(ms) => ms.trim().parse().ok().map(Duration::from_millis),
        None => t
            .trim_end_matches('s')
            .trim()
            .parse()
            .ok()
            .map(Duration::from_secs),
    };
    parsed.filter(|d| !d.is_zero()).unwrap_or_else(|| {
        tracing::warn!("CUBA_EXEC_BRIDGE_TIMEOUT={text:?} is not a duration; using 30 s");
        BRIDGE_HANDSHAKE
    })
}

fn spawn_error(spec: &HostSpec, program: &str, e: &io::Error) -> String {
    match (&spec.bridge, e.kind()) {
        (Bridge::Ssh { .. }, io::ErrorKind::NotFound) => {
            "`ssh` is not installed here (not found on PATH): install OpenSSH's client \
             (e.g. `apt install openssh-client`)"
                .into()
        }
        (_, io::ErrorKind::NotFound) if program.contains('/') => {
            format!("the bridge command `{program}` was not found: check the path in `command`")
        }
        (_, io::ErrorKind::NotFound) => format!(
            "the bridge command `{program}` was not found on PATH: install it or give its \
             full path in `command`"
        ),
        _ => format!("cannot start the bridge `{program}`: {e}"),
    }
}

/// What a failed first connection means, and what to do about it.
fn explain(
    spec: &HostSpec,
    e: ClientError,
    (status, limit): (Option<ExitStatus>, Duration),
    stderr: Option<String>,
) -> String {
    let remote_bin = spec.remote_bin.as_deref().unwrap_or("cubactl");
    let said = stderr
        .as_deref()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    match e {
        ClientError::Handshake(HandshakeError::VersionMismatch { daemon, client, .. }) => {
            let fix = match daemon < client {
                true => format!(
                    "upgrade cuba-exec on {} (then `cubactl daemon restart` there)",
                    spec.name
                ),
                false => "upgrade cuba-exec on this machine".to_string(),
            };
            format!(
                "its cubad speaks protocol version {daemon}, this client speaks {client}: {fix}"
            )
        }
        ClientError::Handshake(
            HandshakeError::Refused(reason) | HandshakeError::AnotherUser(reason),
        ) => {
            format!("its cubad refused the connection: {reason}")
        }
        ClientError::Handshake(HandshakeError::NotProtocol(first)) => format!(
            "`{}` answered with something other than cuba-exec's protocol: it wrote {}{said}; \
             make sure it runs `cubactl bridge` and that nothing (a login banner, a shell \
             startup file) writes to its stdout",
            spec.via(),
            crate::handshake::shown(&first)
        ),
        ClientError::Handshake(HandshakeError::BadMagic | HandshakeError::Truncated) => format!(
            "`{}` answered with something other than cuba-exec's protocol{said}; make sure it \
             runs `cubactl bridge` and that nothing (a login banner, a shell startup file) \
             writes to its stdout",
            spec.via()
        ),
        ClientError::Broken { why, .. } => format!(
            "after its welcome, `{}` {why}{said}; make sure nothing but `cubactl bridge` writes \
             to its stdout",
            spec.via()
        ),
        // Killed by this client when the time was up: its exit says nothing.
        ClientError::Io(io) if io.kind() == io::ErrorKind::TimedOut => format!(
            "no answer through `{}` within {} s{said}: is the host reachable, and does \
             `cubactl bridge` start there?",
            spec.via(),
            limit.as_secs_f32()
        ),
        other => {
            let code = status.and_then(|s| s.code());
            let not_found = code == Some(127)
                || stderr.as_deref().is_some_and(|s| {
                    s.contains("not found") || s.contains("No such file or directory")
                });
            match (&spec.bridge, code) {
                (Bridge::Ssh { .. }, _) if not_found => format!(
                    "`{remote_bin}` is not installed there{said}: install cuba-exec on {} or set \
                     remote_bin in [hosts.{}] to the path of its cubactl",
                    spec.name, spec.name
                ),
                (Bridge::Pod(p), _) if not_found => format!(
                    "`{remote_bin}` is not in pod {}{said}: put cuba-exec in its image (a \
                     recipe is in docs/hosts.md) or set remote_bin in [hosts.{}] to the path of \
                     its cubactl",
                    p.pod, spec.name
                ),
                (Bridge::Ssh { dest, .. }, Some(255)) => format!(
                    "cannot reach it through ssh {dest}: {}",
                    stderr.unwrap_or_else(|| "ssh failed without a message".into())
                ),
                _ if status.is_some() => format!(
                    "the bridge `{}` exited ({}){said}",
                    spec.via(),
                    status.map(|s| s.to_string()).unwrap_or_default()
                ),
                _ => format!("no answer through `{}`: {other}{said}", spec.via()),
            }
        }
    }
}
