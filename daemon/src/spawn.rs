//! Starting a process: validate the request, check the command policy, reserve a table slot,
//! spawn it through the shell in its own process group with the client's environment and cwd,
//! and hand the child to its supervisor.

use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuba_protocol::{
    ClientInfo, ErrorKind, Owner, ProcKind, ProcState, ProcessInfo, ProtocolError, SpawnRequest,
};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::daemon::{now_ms, Daemon};
use crate::journal::{End, Record};
use crate::output::Output;
use crate::proc::{Proc, ProcData, StdinMsg};
use crate::pty::Master;
use crate::spool::Spool;
use crate::supervise::{supervise, ChildIo, InputTarget, Source};
use crate::tree::TreeRoot;

/// Linux refuses a single argument longer than this (MAX_ARG_STRLEN), counting its terminating
/// NUL: command text of this length or more is handed to the shell as a script file.
const MAX_ARG: usize = 128 * 1024;
/// Pipe buffer asked for, so a fast writer needs fewer wake-ups (capped by the kernel setting).
const PIPE_SIZE: i32 = 1024 * 1024;
const STDIN_QUEUE: usize = 64;
const MAX_NAME: usize = 256;

pub fn spool_dir(config: &Config, id: u64) -> PathBuf {
    config.state_dir.join("spool").join(id.to_string())
}

pub fn script_path(config: &Config, id: u64) -> PathBuf {
    config.state_dir.join("scripts").join(format!("{id}.sh"))
}

fn bad(message: impl Into<String>) -> ProtocolError {
    ProtocolError::new(ErrorKind::BadRequest, message)
}

fn validate(req: &SpawnRequest) -> Result<(), ProtocolError> {
    if req.command.trim().is_empty() {
        return Err(bad("command is empty: pass the shell text to run"));
    }
    if req.command.contains('\0') {
        return Err(bad(
            "command contains a NUL byte, which no shell can receive",
        ));
    }
    for (k, v) in &req.env {
        let k = k.as_bytes();
        if k.is_empty() || k.contains(&b'=') || k.contains(&0) {
            return Err(bad(format!(
                "environment variable name {:?} is invalid (empty, or contains '=' or NUL)",
                String::from_utf8_lossy(k)
            )));
        }
        if v.as_bytes().contains(&0) {
            return Err(bad(format!(
                "value of environment variable {} contains a NUL byte",
                String::from_utf8_lossy(k)
            )));
        }
    }
    if req.cwd.as_ref().is_some_and(|c| c.as_bytes().contains(&0)) {
        return Err(bad("cwd contains a NUL byte"));
    }
    if req
        .shell
        .as_ref()
        .is_some_and(|s| s.is_empty() || s.contains('\0'))
    {
        return Err(bad("shell must be a non-empty path without NUL bytes"));
    }
    if req.name.as_ref().is_some_and(|n| n.len() > MAX_NAME) {
        return Err(bad(format!("name is longer than {MAX_NAME} bytes")));
    }
    if let Some(size) = req.tty {
        crate::pty::valid_size(size).map_err(bad)?;
    }
    Ok(())
}

/// Starts a process for `client`. A process that cannot start (bad cwd, missing shell) is still
/// a record, in state `FailedToStart` with the OS reason.
pub fn spawn(
    d: &Arc<Daemon>,
    client: &ClientInfo,
    policy: &Arc<crate::policy::Effective>,
    req: SpawnRequest,
) -> Result<ProcessInfo, ProtocolError> {
    match start_or_find(d, client, policy, req, false)? {
        Reserved::New(info) | Reserved::Existing(info) => Ok(info),
    }
}

/// What `reserve` found: a new record, or (for `ensure`) the running process to reuse.
pub enum Reserved<T> {
    New(T),
    Existing(T),
}

/// `spawn`, or with `ensure` first look (atomically with the reservation) for a running
/// process of the same name and command, and return it instead.
pub fn start_or_find(
    d: &Arc<Daemon>,
    client: &ClientInfo,
    policy: &Arc<crate::policy::Effective>,
    req: SpawnRequest,
    ensure: bool,
) -> Result<Reserved<ProcessInfo>, ProtocolError> {
    validate(&req)?;
    if ensure && req.name.is_none() {
        return Err(bad(
            "ensure needs a name: it finds a running process by name and command",
        ));
    }
    let cwd = match &req.cwd {
        Some(c) => Path::new(&client.cwd).join(c),
        None => PathBuf::from(&client.cwd),
    };
    // --- Policy: the connection's effective policy (the daemon's, narrowed per client).
    let decision = policy.check_spawn(req.shell.as_deref(), &req.command, &cwd);
    if !decision.allowed {
        let cwd_text = cwd.display().to_string();
        d.audit.refused(client, &req.command, &cwd_text, &decision);
        let rule = decision.rule.as_deref().unwrap_or("policy");
        let message = format!("refused by the {rule} rule: {}", decision.message);
        return Err(ProtocolError::new(ErrorKind::Blocked, message));
    }
    // --- Side-effect declarations (side_effects.rs): unknown names are BAD_REQUEST, a blocked
    // category is BLOCKED and audited like a policy refusal. The caller's word, not verified.
    match crate::side_effects::check(&req.side_effects, &d.config.blocked_side_effects) {
        Ok(()) => {}
        Err(crate::side_effects::Refusal::Bad(e)) => return Err(e),
        Err(crate::side_effects::Refusal::Blocked(e, decision)) => {
            let cwd_text = cwd.display().to_string();
            d.audit.refused(client, &req.command, &cwd_text, &decision);
            return Err(e);
        }
    }
    // --- End of side-effect declarations.
    if req.session.is_some() {
        if ensure {
            return Err(bad(
                "ensure cannot be combined with session: a session runs one command at a time",
            ));
        }
        return crate::session::run(d, client, policy, req, &cwd).map(Reserved::New);
    }
    let p = match reserve(d, client, &req, &cwd, ensure, ProcKind::Command)? {
        Reserved::New(p) => p,
        Reserved::Existing(p) => return Ok(Reserved::Existing(p.info())),
    };
    launch(d, client, policy, &p, req, &cwd, Program::Command, None);
    Ok(Reserved::New(p.info()))
}

/// What the child runs: the shell with the command text, or a session's shell reading
/// commands from the read end of a pipe of their own (given as fd 3), so that what its
/// commands leave unread on stdin is never taken for a command.
pub enum Program {
    Command,
    SessionShell(OwnedFd),
}

/// Starts the process of the reserved record `p` and hands it to its supervisor (with
/// `router` for a session's shell). A process that cannot start leaves the record in state
/// `FailedToStart` with the reason, which is also returned.
#[allow(clippy::too_many_arguments)]
pub fn launch(
    d: &Arc<Daemon>,
    client: &ClientInfo,
    policy: &Arc<crate::policy::Effective>,
    p: &Arc<Proc>,
    req: SpawnRequest,
    cwd: &Path,
    program: Program,
    router: Option<crate::session::Router>,
) -> Option<String> {
    // --- Policy: a connection from inside this process's tree inherits it (policy::ancestry).
    p.lock().policy = Some(policy.clone());
    let id = p.id;
    let started = Instant::now();
    let failure = match start(d, client, policy, &req, cwd, id, &program) {
        Ok((child, root)) => {
            tracing::debug!(
                id,
                pid = root.pid,
                us = started.elapsed().as_micros() as u64,
                "spawned"
            );
            let (control_tx, control_rx) = mpsc::channel(16);
            let (stdin_tx, stdin_rx) = mpsc::channel(STDIN_QUEUE);
            {
                let mut data = p.lock();
                if let (StdinSink::Pty(master), Some(size)) = (&child.1, req.tty) {
                    data.tty = Some(crate::proc::TtyData {
                        master: Some(master.clone()),
                        screen: crate::pty::Screen::new(size),
                    });
                }
                data.info.pid = root.pid as u32;
                data.root = Some(root.clone());
                data.control = Some(control_tx);
                data.stdin = Some(stdin_tx.clone());
            }
            let info = p.info();
            // Before the supervisor exists, so this line precedes the process's end line.
            d.audit.allowed(client, &info);
            d.journal.started(&Record {
                info,
                start_time: root.start_time,
                marker: root.marker.clone(),
            });
            if let Some(bytes) = req.stdin {
                // The queue is empty: this cannot fail for lack of room.
                let _ = stdin_tx.try_send(StdinMsg::Data(bytes));
            }
            if req.close_stdin {
                let _ = stdin_tx.try_send(StdinMsg::Eof);
            }
            tokio::spawn(write_stdin(child.1, stdin_rx));
            let timeout = req.timeout_ms.map(Duration::from_millis);
            tokio::spawn(supervise(
                d.clone(),
                p.clone(),
                child.0,
                control_rx,
                timeout,
                router,
            ));
            None
        }
        Err(reason) => {
            let end = {
                let mut data = p.lock();
                data.info.state = ProcState::FailedToStart;
                data.info.error = Some(reason.clone());
                data.info.ended_at_ms = Some(now_ms());
                data.drained = true;
                End {
                    id,
                    state: data.info.state,
                    exit_code: None,
                    signal: None,
                    error: data.info.error.clone(),
                    ended_at_ms: now_ms(),
                    stdout_bytes: 0,
                    stderr_bytes: 0,
                }
            };
            d.journal.started(&Record {
                info: p.info(),
                start_time: 0,
                marker: d.marker(id),
            });
            d.journal.ended(end);
            d.audit.allowed(client, &p.info());
            d.audit.ended(&p.info());
            Some(reason)
        }
    };
    d.table_changed();
    failure
}

/// Checks `max_procs` and inserts a `Running` record under one table lock, so concurrent
/// spawns cannot overshoot the limit.
pub fn reserve(
    d: &Arc<Daemon>,
    client: &ClientInfo,
    req: &SpawnRequest,
    cwd: &Path,
    ensure: bool,
    kind: ProcKind,
) -> Result<Reserved<Arc<Proc>>, ProtocolError> {
    let mut table = d.table();
    if ensure {
        let same = table.procs.values().find(|p| {
            let data = p.lock();
            !data.finished() && data.info.name == req.name && data.info.command == req.command
        });
        if let Some(p) = same {
            return Ok(Reserved::Existing(p.clone()));
        }
    }
    // A command in a session is not a process of its own: the session's shell counts.
    let running = table
        .procs
        .values()
        .filter(|p| {
            let d = p.lock();
            !d.finished() && d.info.kind != ProcKind::InSession
        })
        .count();
    if kind != ProcKind::InSession && running >= d.config.max_procs {
        return Err(ProtocolError::new(
            ErrorKind::Limit,
            format!(
                "{running} processes are running, the most allowed (max_procs = {}); stop one \
                 (send_signal / cubactl kill ID) or raise CUBA_EXEC_MAX_PROCS",
                d.config.max_procs
            ),
        ));
    }
    let id = table.next_id;
    table.next_id += 1;
    let spool = match Spool::create(spool_dir(&d.config, id), d.config.spool_cap) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(id, "no spool, output kept in memory only: {e}");
            None
        }
    };
    let info = ProcessInfo {
        id,
        pid: 0,
        owner: Owner {
            kind: client.kind,
            name: client.name.clone(),
            pid: client.pid,
        },
        name: req.name.clone(),
        command: req.command.clone(),
        cwd: cwd.display().to_string(),
        state: ProcState::Running,
        exit_code: None,
        signal: None,
        error: None,
        started_at_ms: now_ms(),
        ended_at_ms: None,
        timeout_ms: req.timeout_ms,
        stdout_bytes: 0,
        stderr_bytes: 0,
        dropped_bytes: 0,
        kind,
        tty: req.tty,
        session: req.session.clone(),
        notice: None,
    };
    let output = Output::new(d.config.buffer_size, spool);
    let p = Arc::new(Proc::new(ProcData::new(info, output, false)));
    table.procs.insert(id, p.clone());
    Ok(Reserved::New(p))
}

type Started = ((ChildIo, StdinSink), TreeRoot);

/// Where the child's input, output and terminal are, before it is spawned.
enum Plumbing {
    Pipes,
    Tty(Arc<Master>, OwnedFd),
}

fn start(
    d: &Arc<Daemon>,
    client: &ClientInfo,
    policy: &crate::policy::Effective,
    req: &SpawnRequest,
    cwd: &Path,
    id: u64,
    program: &Program,
) -> Result<Started, String> {
    match std::fs::metadata(cwd) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("cwd {}: not a directory", cwd.display())),
        Err(e) => return Err(format!("cwd {}: {e}", cwd.display())),
    }
    let shell = req.shell.as_deref().unwrap_or(&d.config.shell);
    let mut cmd = Command::new(shell);
    if let Program::SessionShell(commands) = &program {
        // No start-up files, so the session is the client's environment and nothing else (as
        // `sh -c` is); the script is the command pipe, which the shell reads line by line.
        if Path::new(shell).file_name().is_some_and(|n| n == "bash") {
            cmd.arg("--noprofile").arg("--norc");
        }
        cmd.arg("/dev/fd/3");
        let fd = std::os::fd::AsRawFd::as_raw_fd(commands);
        // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let ok = if fd == 3 {
                    // dup2 onto itself would keep close-on-exec.
                    libc::fcntl(3, libc::F_SETFD, 0) == 0
                } else {
                    libc::dup2(fd, 3) == 3
                };
                if ok {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    } else if req.command.len() >= MAX_ARG {
        let script = script_path(&d.config, id);
        let written = script
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&script, &req.command));
        if let Err(e) = written {
            return Err(format!(
                "cannot write script file {}: {e}",
                script.display()
            ));
        }
        cmd.arg(&script);
    } else {
        cmd.arg("-c").arg(&req.command);
    }
    let marker = d.marker(id);
    let (marker_name, marker_value) = marker.split_once('=').unwrap_or((&marker, ""));
    cmd.current_dir(cwd)
        .env_clear()
        .envs(client.env.iter().map(|(k, v)| (k, v)))
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .env(marker_name, marker_value);
    let plumbing = match req.tty {
        None => {
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            // Its own process group (the tree's handle). No `pre_exec` unless a sandbox is
            // configured: it forces a full fork of the daemon, while without it std uses
            // posix_spawn (vfork-fast). The daemon runs in a session of its own without a
            // terminal, so children have no terminal either.
            cmd.process_group(0);
            Plumbing::Pipes
        }
        Some(size) => {
            let (master, slave) = crate::pty::open(size)
                .map_err(|e| format!("cannot open a pseudo-terminal: {e}"))?;
            let dup = |fd: &OwnedFd| {
                fd.try_clone()
                    .map(Stdio::from)
                    .map_err(|e| format!("cannot open a pseudo-terminal: {e}"))
            };
            cmd.stdin(dup(&slave)?)
                .stdout(dup(&slave)?)
                .stderr(dup(&slave)?);
            if !has_term(client, req) {
                cmd.env("TERM", "xterm-256color");
            }
            // A session of its own with the terminal as its controlling terminal, as a login
            // on a terminal has: job control, Ctrl-C through the line discipline, SIGWINCH,
            // SIGHUP when the terminal goes. (setsid also makes it a process group leader.)
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            Plumbing::Tty(Arc::new(master), slave)
        }
    };
    // The daemon's sandbox, plus what this client asked for; confined to its (narrowed) roots.
    let sandbox = &crate::sandbox::Sandbox {
        workspace_write: d.config.sandbox.workspace_write || policy.write_confined,
        no_network: d.config.sandbox.no_network || policy.no_network,
        tmpdir: d.config.sandbox.tmpdir.clone(),
    };
    // Kept alive until the spawn returns: the child enters its ruleset.
    let prepared = if sandbox.active() {
        let p = sandbox
            .prepare(&policy.rules().dirs, cwd)
            .map_err(|e| format!("cannot prepare the sandbox: {e:#}"))?;
        p.install(&mut cmd);
        Some(p)
    } else {
        None
    };
    let spawned = d.reaper.spawn(&mut cmd);
    drop(prepared);
    // The child has its copies of the terminal end: the daemon keeps none, so the master
    // reads EOF once the child's tree closes it.
    drop(cmd);
    let (mut child, exit, start_time) = spawned.map_err(|e| match sandbox.active() {
        true => format!("cannot run {shell} in the sandbox: {e}"),
        false => format!("cannot run {shell}: {e}"),
    })?;
    // ---- resource limits (limits.rs): prlimit + cgroup move on the new pid; kills on failure.
    d.limits.apply_or_kill(id, child.id() as i32)?;
    // ---- end resource limits
    let root = TreeRoot {
        pid: child.id() as i32,
        start_time,
        marker,
    };
    if let Plumbing::Tty(master, slave) = plumbing {
        drop(slave);
        let io = ChildIo {
            stdout: Source::Pty(master.clone()),
            stderr: None,
            exit,
            input: Some(InputTarget::Tty(master.clone())),
        };
        return Ok(((io, StdinSink::Pty(master)), root));
    }
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        return Err("child has no pipes".to_string());
    };
    let out_fd = OwnedFd::from(stdout);
    let err_fd = OwnedFd::from(stderr);
    for fd in [&out_fd, &err_fd] {
        use std::os::fd::AsRawFd;
        // SAFETY: F_SETPIPE_SZ on a pipe fd we own; failure only means a smaller buffer.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE) };
    }
    let stdin = OwnedFd::from(stdin);
    let io_err = |e: std::io::Error| format!("cannot watch the child's pipes: {e}");
    let io = ChildIo {
        stdout: Source::Pipe(pipe::Receiver::from_owned_fd(out_fd).map_err(io_err)?),
        stderr: Some(Source::Pipe(
            pipe::Receiver::from_owned_fd(err_fd).map_err(io_err)?,
        )),
        exit,
        input: pipe_inode(&stdin).map(InputTarget::Pipe),
    };
    let stdin = pipe::Sender::from_owned_fd(stdin).map_err(io_err)?;
    Ok(((io, StdinSink::Pipe(stdin)), root))
}

/// Whether the command gets a `TERM` from its caller: set in the request, or a real one (not
/// `dumb`) in the client's environment.
fn has_term(client: &ClientInfo, req: &SpawnRequest) -> bool {
    let is_term = |k: &std::ffi::OsString| k.as_bytes() == b"TERM";
    req.env.iter().any(|(k, _)| is_term(k))
        || client
            .env
            .iter()
            .any(|(k, v)| is_term(k) && !v.is_empty() && v.as_bytes() != b"dumb")
}

/// The inode of a pipe (shared by both ends): what `/proc/PID/fd/N` of a reader links to as
/// `pipe:[INODE]`.
fn pipe_inode(fd: &OwnedFd) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat on an fd we own, into a buffer of the right type.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: fstat succeeded, so it filled the buffer.
    let st = unsafe { st.assume_init() };
    Some(st.st_ino)
}

/// Where stdin writes go: the pipe, or the terminal (where the line discipline turns `C-c`
/// into SIGINT, and so on).
pub enum StdinSink {
    Pipe(pipe::Sender),
    Pty(Arc<Master>),
}

impl StdinSink {
    async fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            StdinSink::Pipe(p) => p.write_all(data).await,
            StdinSink::Pty(m) => m.write_all(data).await,
        }
    }
}

/// Feeds queued stdin writes to the child; ends at EOF, when the child closes its end, or when
/// the process finishes (the queue's sender is dropped).
pub async fn write_stdin(mut sink: StdinSink, mut rx: mpsc::Receiver<StdinMsg>) {
    while let Some(msg) = rx.recv().await {
        match msg {
            StdinMsg::Data(bytes) => {
                if let Err(e) = sink.write_all(&bytes).await {
                    tracing::debug!("stdin closed by the process: {e}");
                    break;
                }
            }
            StdinMsg::Eof => break,
        }
    }
    rx.close();
}
