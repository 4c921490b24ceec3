//! The old program's half of an upgrade: pause every supervisor and
//! stdin writer, write the hand-over file, keep the descriptors open, and `execve`. Any
//! failure before the exec succeeds resumes everything as it was.

use std::convert::Infallible;
use std::ffi::CString;
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::{wire, ProcKind};
use tokio::sync::oneshot;
use tokio::time::timeout;

use super::{put, Header, SavedProc, SavedSession, SavedStdin, SavedTerminal, VERSION};
use crate::platform::set_cloexec;
use crate::processes::launch::Confinement;
use crate::serving::daemon::Daemon;
use crate::serving::new_program::Accepted;
use crate::state::record::{Control, Paused, Proc, StdinMsg, StdinPaused};

/// How long a supervisor or stdin writer may take to pause.
const PAUSE_WITHIN: Duration = Duration::from_secs(2);
/// Attempts while a process is just ending (its exit is being handled), and the pause between.
const ATTEMPTS: u32 = 5;
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// The descriptors the daemon's `main` holds that the new program needs.
#[derive(Clone, Copy, Debug)]
pub struct Inherited {
    pub listener: RawFd,
    pub lock: RawFd,
}

/// `(shell id, name, nonce, command pipe, confinement)` of an idle session.
type IdleSession = (u64, String, String, RawFd, Confinement);

/// A paused process: its state and what resumes it.
struct Held {
    p: Arc<Proc>,
    state: Paused,
    stdin: Option<StdinPaused>,
    resume: Vec<oneshot::Sender<()>>,
}

/// Hands the daemon over to the accepted program. Returns only when that failed (with the
/// reason), after resuming everything; on success the exec replaced this program.
pub async fn hand_over(d: &Daemon, inherited: Inherited, binary: &Accepted) -> String {
    let reaper = d.launcher().reaper().clone();
    reaper.freeze(true);
    let mut attempt = 0;
    let held = loop {
        attempt += 1;
        match pause_all(d).await {
            Ok(held) => break held,
            Err((held, why)) => {
                resume(held);
                if attempt >= ATTEMPTS || !why.busy {
                    reaper.freeze(false);
                    return why.text;
                }
                tokio::time::sleep(RETRY_AFTER).await;
            }
        }
    };
    // Last: nothing the exec checks have received may be left unanswered by the exec.
    let checks = match d.launcher().exec_checking().pause(PAUSE_WITHIN).await {
        Ok(checks) => checks,
        Err(why) => {
            resume(held);
            reaper.freeze(false);
            return why;
        }
    };
    let why = match write_and_exec(d, inherited, binary, &held) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    drop(checks);
    resume(held);
    reaper.freeze(false);
    why
}

struct NotNow {
    text: String,
    /// A process is just ending: trying again shortly should work.
    busy: bool,
}

async fn pause_all(d: &Daemon) -> Result<Vec<Held>, (Vec<Held>, NotNow)> {
    let mut held = Vec::new();
    for p in d.table().running() {
        let (control, stdin) = {
            let rec = p.lock();
            (rec.control.clone(), rec.stdin.clone())
        };
        // A command in a session is its shell's: the shell is paused (idle) or busy.
        let in_session = p.lock().info().kind == ProcKind::InSession;
        let Some(control) = control.filter(|_| !in_session) else {
            continue;
        };
        let (reply, answer) = oneshot::channel();
        let (go, resume) = oneshot::channel();
        let sent = control.send(Control::Pause { reply, resume }).await.is_ok();
        let state = match timeout(PAUSE_WITHIN, answer).await {
            Ok(Ok(Some(state))) if sent => state,
            Ok(Ok(None)) | Ok(Err(_)) => {
                let (kind, session) = {
                    let rec = p.lock();
                    (
                        rec.info().kind,
                        rec.info().session.clone().unwrap_or_default(),
                    )
                };
                let text = match kind {
                    ProcKind::Session => format!(
                        "session {session} (process {}) is running a command; wait for it or \
                         interrupt it, then upgrade",
                        p.id
                    ),
                    _ => format!("process {} is ending; try again", p.id),
                };
                return Err((held, NotNow { text, busy: true }));
            }
            _ => {
                let text = format!("the supervisor of process {} did not pause", p.id);
                return Err((held, NotNow { text, busy: false }));
            }
        };
        let mut h = Held {
            p: p.clone(),
            state,
            stdin: None,
            resume: vec![go],
        };
        if let Some(tx) = stdin {
            let (reply, answer) = oneshot::channel();
            let (go, resume) = oneshot::channel();
            let msg = StdinMsg::Pause { reply, resume };
            // A writer that has ended (stdin closed) answers nothing: no stdin to hand over.
            if timeout(PAUSE_WITHIN, tx.send(msg))
                .await
                .is_ok_and(|r| r.is_ok())
            {
                match timeout(PAUSE_WITHIN, answer).await {
                    Ok(Ok(state)) => {
                        h.stdin = Some(state);
                        h.resume.push(go);
                    }
                    Ok(Err(_)) => {}
                    Err(_) => {
                        let text = format!(
                            "process {} does not read its stdin and writes are queued for it",
                            p.id
                        );
                        held.push(h);
                        return Err((held, NotNow { text, busy: false }));
                    }
                }
            }
        }
        held.push(h);
    }
    Ok(held)
}

fn resume(held: Vec<Held>) {
    for h in held {
        for go in h.resume {
            let _ = go.send(());
        }
    }
}

fn saved(h: &Held, sessions: &[IdleSession]) -> Result<SavedProc, String> {
    let session =
        sessions
            .iter()
            .find(|s| s.0 == h.p.id)
            .map(|(_, name, nonce, commands, confinement)| SavedSession {
                name: name.clone(),
                nonce: nonce.clone(),
                commands: *commands,
                confinement: confinement.clone(),
            });
    let rec = h.p.lock();
    if rec.info().kind == ProcKind::Session && session.is_none() {
        return Err(format!("session process {} is not idle", h.p.id));
    }
    let root = rec
        .root
        .clone()
        .ok_or_else(|| format!("process {} has no tree", h.p.id))?;
    let output = wire::encode(&rec.output).map_err(|e| {
        format!(
            "the output of process {} cannot be handed over: {e}",
            h.p.id
        )
    })?;
    let terminal = match (&rec.tty, h.state.stdout) {
        (Some(tty), Some(master)) => Some(SavedTerminal {
            master,
            path: tty
                .master
                .as_ref()
                .map(|m| m.path.clone())
                .unwrap_or_default(),
            screen: tty.screen.state(),
        }),
        _ => None,
    };
    let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
    Ok(SavedProc {
        info: rec.snapshot(),
        start_time: root.start_time,
        marker: root.marker,
        token: rec.token,
        output,
        stop: rec.stop,
        stdout: if terminal.is_some() {
            None
        } else {
            h.state.stdout
        },
        stderr: h.state.stderr,
        terminal,
        stdin: h.stdin.as_ref().map(|s| SavedStdin {
            fd: s.fd,
            pending: s.pending.clone(),
            eof: s.eof,
        }),
        timeout_left_ms: ms(h.state.timeout_left),
        kill_left_ms: ms(h.state.kill_left),
        session,
        policy: rec.policy.as_deref().cloned(),
        cgroup: rec.cgroup.as_ref().and_then(|c| c.slot()),
        exec_listener: rec.exec_listener.as_ref().map(|l| l.as_raw_fd()),
        tenant: rec.tenant.as_deref().map(String::from),
        sockets: rec.sockets.as_ref().map(|s| s.saved()),
        budget: rec
            .cgroup
            .as_ref()
            .and_then(|c| c.agent())
            .map(|g| (g.name().to_string(), g.budget())),
    })
}

fn write_and_exec(
    d: &Daemon,
    inherited: Inherited,
    accepted: &Accepted,
    held: &[Held],
) -> Result<Infallible, String> {
    let binary = accepted.path.as_path();
    let sessions = d.sessions().idle();
    let procs = held
        .iter()
        .map(|h| saved(h, &sessions))
        .collect::<Result<Vec<_>, _>>()?;
    let path = d.config().state_dir.join("handover");
    // New, never through a link: it carries every process the daemon holds.
    let mut file = cuba_protocol::safe_fs::create_new(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    // Only the descriptor is passed on: nothing is left behind should either program die.
    let _ = std::fs::remove_file(&path);
    let (started_at_ms, upgrades) = d.upgrades();
    let header = Header {
        version: VERSION,
        started_at_ms,
        upgrades,
        listener: inherited.listener,
        lock: inherited.lock,
        next_id: d.table().next_id(),
        procs: procs.len() as u32,
        tokens: d.table().tokens().export(),
        events_next: d.table().events().next_seq(),
    };
    write_file(&mut file, &header, &procs)
        .map_err(|e| format!("cannot write the hand-over: {e}"))?;
    let mut keep: Vec<RawFd> = vec![file.as_raw_fd(), inherited.listener, inherited.lock];
    for p in &procs {
        keep.extend(p.stdout.iter().chain(p.stderr.iter()));
        keep.extend(p.terminal.as_ref().map(|t| t.master));
        keep.extend(p.stdin.as_ref().and_then(|s| s.fd));
        keep.extend(p.session.as_ref().map(|s| s.commands));
        keep.extend(p.exec_listener);
    }
    for &fd in &keep {
        set_cloexec(fd, false).map_err(|e| format!("cannot keep descriptor {fd}: {e}"))?;
    }
    tracing::info!(
        binary = %binary.display(),
        processes = procs.len(),
        "handing over to a new program"
    );
    let err = exec(d, accepted, file.as_raw_fd());
    for &fd in &keep {
        let _ = set_cloexec(fd, true);
    }
    Err(format!("cannot run {}: {err}", binary.display()))
}

fn write_file(file: &mut File, header: &Header, procs: &[SavedProc]) -> std::io::Result<()> {
    let mut out = BufWriter::new(&mut *file);
    put(&mut out, header)?;
    for p in procs {
        put(&mut out, p)?;
    }
    out.flush()?;
    drop(out);
    file.rewind()
}

/// `execveat(accepted, [binary, --socket S, --state-dir D, --handover FD])` with this
/// environment: the file judged, through its descriptor; returns only on failure.
fn exec(d: &Daemon, accepted: &Accepted, fd: RawFd) -> std::io::Error {
    let c = |b: &[u8]| CString::new(b.to_vec()).map_err(std::io::Error::other);
    let args = [
        c(accepted.path.as_os_str().as_bytes()),
        c(b"--socket"),
        c(d.config().socket.as_os_str().as_bytes()),
        c(b"--state-dir"),
        c(d.config().state_dir.as_os_str().as_bytes()),
        c(b"--handover"),
        c(fd.to_string().as_bytes()),
    ];
    let args: Vec<CString> = match args.into_iter().collect() {
        Ok(a) => a,
        Err(e) => return e,
    };
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let fd = accepted.file.as_raw_fd();
    #[cfg(target_os = "linux")]
    let run = || {
        // SAFETY: execveat with an open descriptor, an empty NUL-terminated path and
        // NULL-terminated arrays of NUL-terminated strings, all alive across the call; it
        // returns only on failure.
        unsafe {
            libc::syscall(
                libc::SYS_execveat,
                fd,
                c"".as_ptr(),
                ptrs.as_ptr(),
                envp.as_ptr(),
                libc::AT_EMPTY_PATH,
            )
        };
        std::io::Error::last_os_error()
    };
    // No `execveat` elsewhere: the descriptor's own path (`/dev/fd/N`), as `fexecve` does.
    #[cfg(not(target_os = "linux"))]
    let run = || {
        let Ok(path) = CString::new(accepted.proc_path().into_os_string().into_vec()) else {
            return std::io::Error::from(std::io::ErrorKind::InvalidInput);
        };
        // SAFETY: as above, with a NUL-terminated path.
        unsafe { libc::execve(path.as_ptr(), ptrs.as_ptr(), envp.as_ptr()) };
        std::io::Error::last_os_error()
    };
    let err = run();
    if err.raw_os_error() != Some(libc::ENOENT) {
        return err;
    }
    // A `#!` program reads itself through `/dev/fd/N`, which a close-on-exec descriptor
    // cannot give it; a cubad (ELF) never gets here, so no descriptor is left behind for it.
    if let Err(e) = set_cloexec(fd, false) {
        return e;
    }
    let err = run();
    let _ = set_cloexec(fd, true);
    err
}
