//! Starting a command: its shell's command line, its environment and working directory, its
//! Job Object, and the threads that drain its pipes, feed its stdin and wait for its exit.
//!
//! Threads, not the runtime: an anonymous pipe on Windows cannot be waited on asynchronously,
//! and a blocking read per pipe is what the system offers for it. Each thread only appends to
//! the record and publishes the change; the requests read it on the runtime.

use std::io::{Read, Write};
use std::os::windows::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuba_protocol::{
    now_ms, ErrorKind, ProcState, ProcessInfo, ProtocolError, SpawnRequest, StartFailure, Stream,
};

use super::conn::Client;
use super::table::{Data, Rec, Stop};
use super::Daemon;
use crate::new_record::NewRecord;
use crate::output::{Output, Spool};
use crate::platform::win_shell::{self, Args, Kind};
use crate::platform::windows::job::{Job, Limits};
use crate::side_effects::{self, Refusal};

/// No console window for the command (it still gets a console of its own, hidden: the target
/// of a Ctrl-Break).
const CREATE_NO_WINDOW: u32 = 0x0800_0000;
/// After the exit, how long the pipes may take to say end of file before the exit is published
/// anyway (a process it left behind holds them).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// Stack of each pipe thread: they hold one read buffer, on the heap.
const THREAD_STACK: usize = 64 * 1024;
const READ_BUF: usize = 64 * 1024;
/// Writes queued for a command's stdin before a request is told it does not read them.
pub const STDIN_QUEUE: usize = 64;

/// Starts `req` for `client`: its record, whether it started or failed to (then in state
/// `FailedToStart` with the system's reason), or a refusal that starts nothing.
pub fn start(
    d: &Arc<Daemon>,
    client: &Client,
    req: SpawnRequest,
) -> Result<ProcessInfo, ProtocolError> {
    refuse_unsupported(&req)?;
    if req.command.trim().is_empty() {
        return Err(ProtocolError::bad_request("command is empty"));
    }
    let cwd = working_dir(client, &req);
    let shell = req.shell.clone().unwrap_or_else(|| d.config.shell.clone());
    let kind = Kind::of(&shell);
    let decision = match kind.parsed() {
        true => client
            .policy
            .check_spawn(req.shell.as_deref(), &req.command, &cwd),
        false => client.policy.check_unread(&shell, &req.command, &cwd),
    };
    if !decision.allowed {
        return Err(ProtocolError::new(ErrorKind::Blocked, decision.message));
    }
    match side_effects::check(&req.side_effects, &d.config.blocked_side_effects) {
        Ok(()) => {}
        Err(Refusal::Bad(e) | Refusal::Blocked(e, _)) => return Err(e),
    }
    let owner = client.owner();
    let spool_cap = d.config.spool_cap;
    let buffer = d.config.buffer_size;
    let state = &d.state;
    let rec = d
        .table
        .insert(d.config.max_procs, |id| {
            let spool = Spool::create(state.spool(id), spool_cap);
            Data {
                info: NewRecord::of(owner, &req, &cwd).row(id),
                output: Output::new(buffer, Some(spool)),
                drained: false,
                last_output: Instant::now(),
                stdin: None,
                job: None,
                stop: None,
            }
        })
        .ok_or_else(|| {
            ProtocolError::new(
                ErrorKind::Limit,
                format!(
                    "{} processes are running, the most this daemon runs at once (max_procs); \
                     kill one or wait for one to end",
                    d.config.max_procs
                ),
            )
        })?;
    let env = environment(client, &req);
    match launch(d, &rec, &shell, kind, &req, &cwd, &env) {
        Ok(()) => {}
        Err(e) => {
            let mut data = rec.lock();
            data.info.state = ProcState::FailedToStart;
            data.info.failure = Some(StartFailure::of(&e));
            data.info.error = Some(format!("cannot start `{shell}` in {}: {e}", cwd.display()));
            data.info.ended_at_ms = Some(now_ms());
            data.set_drained();
        }
    }
    rec.notify();
    Ok(rec.info())
}

/// What the Windows daemon does not do yet, refused with what to use instead.
fn refuse_unsupported(req: &SpawnRequest) -> Result<(), ProtocolError> {
    let missing = if req.tty.is_some() {
        Some("a terminal (tty): run it on pipes")
    } else if req.session.is_some() {
        Some("shell sessions: run each command on its own (use `&&` to chain)")
    } else {
        None
    };
    match missing {
        Some(what) => Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!("cubad on Windows does not offer {what}"),
        )),
        None => Ok(()),
    }
}

/// The request's cwd, relative to the client's; the client's when none is given.
fn working_dir(client: &Client, req: &SpawnRequest) -> PathBuf {
    let base = Path::new(&client.info.cwd);
    match &req.cwd {
        Some(dir) => base.join(dir),
        None => base.to_path_buf(),
    }
}

/// The client's environment with the request's on top, as Windows orders a block.
fn environment(client: &Client, req: &SpawnRequest) -> Vec<(String, String)> {
    let text = |env: &[(std::ffi::OsString, std::ffi::OsString)]| -> Vec<(String, String)> {
        env.iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect()
    };
    win_shell::merge_env(&text(&client.info.env), &text(&req.env))
}

fn launch(
    d: &Arc<Daemon>,
    rec: &Arc<Rec>,
    shell: &str,
    kind: Kind,
    req: &SpawnRequest,
    cwd: &Path,
    env: &[(String, String)],
) -> std::io::Result<()> {
    if !cwd.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("the working directory {} does not exist", cwd.display()),
        ));
    }
    let mut cmd = Command::new(shell);
    match win_shell::args(kind, &req.command) {
        Args::Raw(raw) => cmd.raw_arg(raw),
        Args::Quoted(list) => cmd.args(list),
    };
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let limits = Limits {
        processes: d
            .config
            .limits
            .pids_max
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        memory: d.config.limits.memory_max,
    };
    let job = Arc::new(Job::new(limits)?);
    let mut child = job.spawn(&mut cmd, CREATE_NO_WINDOW)?;
    let (stdout, stderr, stdin) = (child.stdout.take(), child.stderr.take(), child.stdin.take());
    let (stdin_tx, stdin_rx) = mpsc::sync_channel(STDIN_QUEUE);
    {
        let mut data = rec.lock();
        data.info.pid = child.id();
        data.info.pids_max = limits.processes.map(u64::from);
        data.job = Some(job);
        data.stdin = Some(stdin_tx.clone());
    }
    let (drained_tx, drained_rx) = mpsc::channel();
    let mut readers = 0;
    for (pipe, stream) in [
        (
            stdout.map(|p| Box::new(p) as Box<dyn Read + Send>),
            Stream::Stdout,
        ),
        (
            stderr.map(|p| Box::new(p) as Box<dyn Read + Send>),
            Stream::Stderr,
        ),
    ] {
        if let Some(pipe) = pipe {
            let (rec, done) = (rec.clone(), drained_tx.clone());
            thread("cubad-out", move || drain(&rec, pipe, stream, &done))?;
            readers += 1;
        }
    }
    drop(drained_tx);
    if let Some(stdin) = stdin {
        if let Some(data) = &req.stdin {
            let _ = stdin_tx.try_send(Some(data.clone()));
        }
        if req.close_stdin {
            let _ = stdin_tx.try_send(None);
        }
        thread("cubad-in", move || feed(stdin, &stdin_rx))?;
    }
    let waited = rec.clone();
    thread("cubad-wait", move || {
        wait(&waited, child, readers, &drained_rx)
    })?;
    if let Some(ms) = req.timeout_ms {
        let grace = d.config.grace;
        let rec = rec.clone();
        tokio::spawn(async move {
            let mut changes = rec.subscribe();
            let deadline = tokio::time::sleep(Duration::from_millis(ms));
            tokio::pin!(deadline);
            loop {
                if rec.lock().finished() {
                    return;
                }
                tokio::select! {
                    _ = &mut deadline => break,
                    changed = changes.changed() => if changed.is_err() { return },
                }
            }
            let grace = Some(grace);
            super::handlers::stop(&rec, Stop::Timeout, cuba_protocol::Signal::Term, grace);
        });
    }
    Ok(())
}

fn thread(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_string())
        .stack_size(THREAD_STACK)
        .spawn(f)
        .map(drop)
}

/// Reads one pipe to its end into the record.
fn drain(rec: &Rec, mut pipe: Box<dyn Read + Send>, stream: Stream, done: &mpsc::Sender<()>) {
    let mut buf = vec![0u8; READ_BUF];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                {
                    let mut data = rec.lock();
                    data.output.append(stream, &buf[..n]);
                    data.last_output = Instant::now();
                }
                rec.notify();
            }
        }
    }
    let _ = done.send(());
}

/// Writes what the requests queue to the stdin pipe; closes it on `None` or when the record
/// goes.
fn feed(mut stdin: std::process::ChildStdin, rx: &mpsc::Receiver<Option<Vec<u8>>>) {
    while let Ok(Some(data)) = rx.recv() {
        if stdin.write_all(&data).is_err() {
            break;
        }
    }
}

/// Waits for the exit, lets the pipes end (within [`DRAIN_AFTER_EXIT`]), then publishes the
/// end; then waits for the rest of the output, if a process left behind still writes.
fn wait(rec: &Rec, mut child: Child, readers: usize, drained: &mpsc::Receiver<()>) {
    let status = child.wait();
    let deadline = Instant::now() + DRAIN_AFTER_EXIT;
    let mut ended = 0;
    while ended < readers {
        let left = deadline.saturating_duration_since(Instant::now());
        match drained.recv_timeout(left) {
            Ok(()) => ended += 1,
            Err(_) => break,
        }
    }
    {
        let mut data = rec.lock();
        data.stdin = None;
        let stop = data.stop;
        let info = &mut data.info;
        info.ended_at_ms = Some(now_ms());
        match status {
            Ok(status) => {
                info.exit_code = status.code();
                info.state = match stop {
                    Some(Stop::Timeout) => ProcState::TimedOut,
                    Some(Stop::Request | Stop::Shutdown) => ProcState::Killed,
                    None => ProcState::Exited,
                };
            }
            Err(e) => {
                info.state = ProcState::Lost;
                info.error = Some(format!("cannot wait for it: {e}"));
            }
        }
        if let Some(usage) = data.job.as_ref().and_then(|j| j.usage().ok()) {
            data.info.cpu_ms = Some(usage.cpu_ns / 1_000_000);
            data.info.memory_peak_bytes = Some(usage.peak_memory).filter(|&b| b > 0);
        }
        if ended == readers {
            data.set_drained();
        }
    }
    rec.notify();
    if ended < readers {
        while ended < readers && drained.recv().is_ok() {
            ended += 1;
        }
        rec.lock().set_drained();
        rec.notify();
    }
}
