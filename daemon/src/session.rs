//! Persistent shell sessions: `run(command, session = "dev")` runs in a long-lived shell named
//! `dev`, so `cd`, exports, functions and activated environments carry over, while each command
//! still gets a record of its own (output, exit code, times, timeout).
//!
//! The shell (bash when present, else sh) reads commands from its stdin pipe. A command is
//! written to a script file and one line is sent that prints a begin marker on both streams,
//! sources the file, and prints an end marker with the status on both streams. Markers are
//! `\x1e` + `CUBA` + a per-session random nonce + `B<id>` / `E<id>:<status>` + `\x1e`: found
//! anywhere in the stream (after a partial line too), never shown. The command is done when both
//! streams have passed its end marker, so no stderr byte arrives after it ended.
//!
//! Interrupting (SIGINT, a timeout) signals the shell's group with SIGINT: the command's
//! processes die as on Ctrl-C, and the shell's trap ends the sourced file (`return 130`) and
//! carries on with the end marker; the session stays usable. What ignores that gets SIGKILL
//! after the grace period, and if the shell itself is stuck, the session is stopped (and
//! started again on next use, with a notice).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cuba_protocol::{
    ClientInfo, ErrorKind, ProcKind, ProcState, ProcessInfo, ProtocolError, Signal, SpawnRequest,
    Stream,
};

use crate::daemon::{now_ms, Daemon};
use crate::journal::{End, Record};
use crate::proc::{Control, Proc, StdinMsg, StopCause};
use crate::spawn::{launch, reserve, Program, Reserved};

const MAX_SESSION_NAME: usize = 64;
/// A marker's text after the prefix: `E` + a u64 + `:` + an i32, with room to spare.
const MAX_MARKER_BODY: usize = 48;
const SEP: u8 = 0x1e;

/// What a session is shared by its shell's supervisor and the requests that run commands.
pub struct Shared {
    pub name: String,
    nonce: String,
    /// The command running now; `None` while the shell waits for the next one.
    current: Mutex<Option<Arc<Proc>>>,
    /// The sandbox its shell runs in: another client may use the session only if its own
    /// confinement is the same.
    confinement: Confinement,
    /// The write end of the pipe the shell reads its commands from (non-blocking).
    commands: Mutex<std::fs::File>,
}

type Confinement = (bool, bool, Vec<PathBuf>);

impl Shared {
    fn current(&self) -> MutexGuard<'_, Option<Arc<Proc>>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands the shell one line of commands. A line is far shorter than the pipe's atomic
    /// write size and the shell reads it at once; a full pipe means the shell is not reading.
    fn send(&self, line: &str) -> std::io::Result<()> {
        use std::io::Write;
        let mut pipe = self.commands.lock().unwrap_or_else(|e| e.into_inner());
        pipe.write_all(line.as_bytes())
    }
}

impl Sessions {
    /// Whether the session whose shell is record `shell_id` runs a command now.
    pub fn busy(&self, shell_id: u64) -> bool {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values()
            .find(|s| s.shell.id == shell_id)
            .is_some_and(|s| s.shared.current().is_some())
    }
}

struct Session {
    shell: Arc<Proc>,
    shared: Arc<Shared>,
}

/// The daemon's sessions by name.
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

fn bad(message: impl Into<String>) -> ProtocolError {
    ProtocolError::new(ErrorKind::BadRequest, message)
}

fn confinement(d: &Daemon, policy: &crate::policy::Effective) -> Confinement {
    (
        d.config.sandbox.workspace_write || policy.write_confined,
        d.config.sandbox.no_network || policy.no_network,
        policy.rules().dirs.clone(),
    )
}

/// The shell for a new session: the caller's, else bash when installed, else the daemon's.
fn session_shell(d: &Daemon, req: &SpawnRequest) -> String {
    if let Some(shell) = &req.shell {
        return shell.clone();
    }
    ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .map_or_else(|| d.config.shell.clone(), str::to_string)
}

fn random_nonce() -> String {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom into a buffer of the given length.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        // Unpredictability is not needed for correctness, only uniqueness in the stream.
        let t = now_ms() ^ u64::from(std::process::id()) << 40;
        bytes = t.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Shell text quoted for `sh`: `'…'`, with `'` as `'\''`.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Runs `req.command` in the session `req.session`, starting the session's shell first when it
/// has none (or its shell has ended). Policy and side effects are checked by the caller.
pub fn run(
    d: &Arc<Daemon>,
    client: &ClientInfo,
    policy: &Arc<crate::policy::Effective>,
    req: SpawnRequest,
    cwd: &Path,
) -> Result<ProcessInfo, ProtocolError> {
    let name = req.session.clone().unwrap_or_default();
    if name.is_empty()
        || name.len() > MAX_SESSION_NAME
        || name.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(bad(format!(
            "session name {name:?} is invalid: 1 to {MAX_SESSION_NAME} characters, no spaces or \
             control characters"
        )));
    }
    if req.tty.is_some() {
        return Err(bad(
            "a session runs on pipes: tty cannot be combined with session (start a tty process \
             running a shell instead)",
        ));
    }
    if req.close_stdin {
        // `stdin` text is fine (it goes to the shell's stdin); closing it would end the session.
        return Err(bad(
            "stdin cannot be closed for a command in a session: the session's shell reads it",
        ));
    }
    let mut map = d.sessions.map.lock().unwrap_or_else(|e| e.into_inner());
    let mut notice = None;
    let live = map
        .get(&name)
        .filter(|s| !s.shell.lock().finished())
        .map(|s| (s.shell.clone(), s.shared.clone()));
    let (shell, shared) = match live {
        Some((shell, shared)) => {
            if shared.confinement != confinement(d, policy) {
                return Err(ProtocolError::new(
                    ErrorKind::Denied,
                    format!(
                        "session {name} runs under a different sandbox than this client's; use \
                         another session name"
                    ),
                ));
            }
            (shell, shared)
        }
        None => {
            let before = map.get(&name).map(|s| s.shell.info());
            let session = start(d, client, policy, &req, cwd, &name)?;
            let info = session.shell.info();
            notice = Some(match before {
                Some(old) => format!(
                    "session {name} was started again (new shell, pid {}): its shell had ended \
                     ({}); cd, exports and functions of before are gone",
                    info.pid,
                    ended_how(&old)
                ),
                None => format!(
                    "session {name} started ({}, pid {})",
                    info.command, info.pid
                ),
            });
            let pair = (session.shell.clone(), session.shared.clone());
            map.insert(name.clone(), session);
            pair
        }
    };
    drop(map);
    let mut current = shared.current();
    if let Some(busy) = current.as_ref() {
        let info = busy.info();
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!(
                "session {name} is busy with process {} ({}); wait for it, interrupt it \
                 (SIGINT to process {}), or use another session",
                info.id,
                preview(&info.command),
                info.id
            ),
        ));
    }
    let (shell_pid, shell_root, stdin, control) = {
        let s = shell.lock();
        (
            s.info.pid,
            s.root.clone(),
            s.stdin.clone(),
            s.control.clone(),
        )
    };
    let (Some(root), Some(stdin), Some(control)) = (shell_root, stdin, control) else {
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!("session {name} has no running shell; run the command again"),
        ));
    };
    // The shell's working directory now: where the command will run.
    let here = std::fs::read_link(format!("/proc/{shell_pid}/cwd")).unwrap_or(cwd.to_path_buf());
    let cmd = match reserve(d, client, &req, &here, false, ProcKind::InSession)? {
        Reserved::New(p) | Reserved::Existing(p) => p,
    };
    let id = cmd.id;
    let script = crate::spawn::script_path(&d.config, id);
    let text = script_text(&req, cwd);
    let written = script
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&script, text));
    let sent = written
        .and_then(|()| shared.send(&run_line(&shared.nonce, id, &script)))
        .map_err(|e| format!("the session's shell does not take commands: {e}"))
        .and_then(|()| match req.stdin.clone() {
            Some(bytes) => stdin
                .try_send(StdinMsg::Data(bytes))
                .map_err(|_| "the session's input queue is full".to_string()),
            None => Ok(()),
        });
    {
        let mut c = cmd.lock();
        c.info.pid = shell_pid;
        c.info.notice = notice;
        c.policy = Some(policy.clone());
        if sent.is_ok() {
            c.stdin = Some(stdin);
            c.control = Some(control.clone());
        }
    }
    d.audit.allowed(client, &cmd.info());
    d.journal.started(&Record {
        info: cmd.info(),
        start_time: root.start_time,
        marker: root.marker.clone(),
    });
    if let Err(reason) = sent {
        end_command(
            d,
            &cmd,
            None,
            None,
            Some(format!(
                "cannot hand the command to session {name}: {reason}"
            )),
        );
        return Ok(cmd.info());
    }
    *current = Some(cmd.clone());
    drop(current);
    let _ = control.try_send(Control::InputSent);
    if let Some(t) = req.timeout_ms {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(t)).await;
            let _ = control.send(Control::CommandTimeout(id)).await;
        });
    }
    d.table_changed();
    Ok(cmd.info())
}

/// The session's shell: a record of kind `Session`, started in `cwd` with the client's
/// environment, its supervisor routing output by markers.
fn start(
    d: &Arc<Daemon>,
    client: &ClientInfo,
    policy: &Arc<crate::policy::Effective>,
    req: &SpawnRequest,
    cwd: &Path,
    name: &str,
) -> Result<Session, ProtocolError> {
    let shell = session_shell(d, req);
    let sreq = SpawnRequest {
        command: shell.clone(),
        shell: Some(shell),
        name: Some(name.to_string()),
        session: Some(name.to_string()),
        ..SpawnRequest::default()
    };
    let p = match reserve(d, client, &sreq, cwd, false, ProcKind::Session)? {
        Reserved::New(p) | Reserved::Existing(p) => p,
    };
    let internal = |e: std::io::Error| {
        ProtocolError::new(
            ErrorKind::Internal,
            format!("cannot make the command pipe of session {name}: {e}"),
        )
    };
    let (read, write) = command_pipe().map_err(internal)?;
    let shared = Arc::new(Shared {
        name: name.to_string(),
        nonce: random_nonce(),
        current: Mutex::new(None),
        confinement: confinement(d, policy),
        commands: Mutex::new(std::fs::File::from(write)),
    });
    // The shell's first line: the pipe's extra descriptor is not for its commands to inherit;
    // aliases work as typed.
    shared
        .send("exec 3<&-; shopt -s expand_aliases 2>/dev/null\n")
        .map_err(internal)?;
    let router = Router::new(shared.clone());
    if let Some(reason) = launch(
        d,
        client,
        policy,
        &p,
        sreq,
        cwd,
        Program::SessionShell(read),
        Some(router),
    ) {
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!("cannot start the shell of session {name}: {reason}"),
        ));
    }
    Ok(Session { shell: p, shared })
}

/// A pipe for the shell's commands: both ends close-on-exec (the shell gets the read end as
/// fd 3 explicitly), the write end non-blocking.
fn command_pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    let (read, write) = crate::fd::pipe()?;
    crate::fd::set_nonblocking(&write)?;
    Ok((read, write))
}

/// The script a command becomes: the request's `cwd` and `env` change the session (as `cd` and
/// `export` typed before it would), then the command text.
fn script_text(req: &SpawnRequest, client_cwd: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut text = String::new();
    if let Some(dir) = &req.cwd {
        let dir = client_cwd.join(dir);
        let dir = String::from_utf8_lossy(dir.as_os_str().as_bytes()).into_owned();
        text.push_str(&format!("cd -- {} || return 1\n", quote(&dir)));
    }
    for (k, v) in &req.env {
        let k = String::from_utf8_lossy(k.as_bytes());
        let v = String::from_utf8_lossy(v.as_bytes());
        text.push_str(&format!("export {k}={}\n", quote(&v)));
    }
    text.push_str(&req.command);
    text.push('\n');
    text
}

/// The line the shell reads for command `id`: markers around the sourced script, SIGINT ending
/// the script (not the shell).
fn run_line(nonce: &str, id: u64, script: &Path) -> String {
    let mark = |body: &str| format!(r"printf '\036CUBA{nonce}{body}\036'");
    let begin = mark(&format!("B{id}"));
    let end = mark(&format!("E{id}:%s"));
    let path = quote(&script.display().to_string());
    format!(
        "{begin}; {begin} >&2; trap 'trap - INT; return 130' INT; . {path}; \
         __cuba_status=$?; trap - INT; {end} \"$__cuba_status\"; {end} \"$__cuba_status\" >&2\n"
    )
}

fn preview(command: &str) -> String {
    let line = command.lines().next().unwrap_or("");
    if line.chars().count() > 60 {
        format!("{}…", line.chars().take(60).collect::<String>())
    } else {
        line.to_string()
    }
}

fn ended_how(info: &ProcessInfo) -> String {
    match (info.exit_code, info.signal) {
        (_, Some(sig)) => format!("{}, {sig}", info.state),
        (Some(code), None) => format!("{}, exit {code}", info.state),
        (None, None) => info.state.to_string(),
    }
}

/// Ends command `cmd`: its final state from how it was stopped (if it was), journal, audit,
/// waiters.
fn end_command(
    d: &Daemon,
    cmd: &Arc<Proc>,
    exit_code: Option<i32>,
    signal: Option<Signal>,
    error: Option<String>,
) {
    let end = {
        let mut c = cmd.lock();
        if c.finished() {
            return;
        }
        c.info.exit_code = exit_code;
        c.info.signal = signal;
        if error.is_some() {
            c.info.error = error;
        }
        c.info.ended_at_ms = Some(now_ms());
        c.info.state = match (c.stop, exit_code, signal) {
            (Some(StopCause::Timeout), ..) => ProcState::TimedOut,
            (Some(StopCause::Request | StopCause::Shutdown), ..) => ProcState::Killed,
            (None, _, Some(_)) => ProcState::Signaled,
            (None, Some(_), None) => ProcState::Exited,
            (None, None, None) => ProcState::Lost,
        };
        c.stdin = None;
        c.control = None;
        End {
            id: cmd.id,
            state: c.info.state,
            exit_code,
            signal,
            error: c.info.error.clone(),
            ended_at_ms: c.info.ended_at_ms.unwrap_or(0),
            stdout_bytes: c.output.stdout_bytes,
            stderr_bytes: c.output.stderr_bytes,
        }
    };
    d.journal.ended(end);
    d.audit.ended(&cmd.info());
    let script = crate::spawn::script_path(&d.config, cmd.id);
    let _ = std::fs::remove_file(script);
    cmd.notify();
    d.table_changed();
    // What it printed goes to its spool after its end is published (nothing is appended to it
    // any more); then it is drained.
    let cmd = cmd.clone();
    tokio::spawn(async move {
        crate::supervise::spill_off_thread(cmd.clone()).await;
        cmd.lock().drained = true;
        cmd.notify();
    });
}

/// Finds markers in one stream, across reads.
#[derive(Default)]
struct Scanner {
    /// The start of what may be a marker, cut by the end of a read.
    carry: Vec<u8>,
}

enum Piece<'a> {
    Data(&'a [u8]),
    Begin(u64),
    End(u64, i32),
}

fn parse_marker(body: &[u8]) -> Option<Piece<'static>> {
    let text = std::str::from_utf8(body).ok()?;
    if let Some(id) = text.strip_prefix('B') {
        return Some(Piece::Begin(id.parse().ok()?));
    }
    let (id, status) = text.strip_prefix('E')?.split_once(':')?;
    Some(Piece::End(id.parse().ok()?, status.parse().ok()?))
}

impl Scanner {
    /// The stream closed: what was held back as a possible marker start is data after all.
    fn flush(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.carry)
    }

    /// Splits `input` (after what was carried) into data and markers, in order.
    fn feed(&mut self, prefix: &[u8], input: &[u8], mut out: impl FnMut(Piece<'_>)) {
        let joined;
        let data: &[u8] = if self.carry.is_empty() {
            input
        } else {
            let mut j = std::mem::take(&mut self.carry);
            j.extend_from_slice(input);
            joined = j;
            &joined
        };
        let mut i = 0;
        while i < data.len() {
            let Some(at) = data[i..].iter().position(|b| *b == SEP).map(|p| p + i) else {
                out(Piece::Data(&data[i..]));
                return;
            };
            if at > i {
                out(Piece::Data(&data[i..at]));
            }
            let rest = &data[at..];
            if rest.len() < prefix.len() {
                if prefix.starts_with(rest) {
                    self.carry = rest.to_vec();
                    return;
                }
                out(Piece::Data(&data[at..at + 1]));
                i = at + 1;
                continue;
            }
            if !rest.starts_with(prefix) {
                out(Piece::Data(&data[at..at + 1]));
                i = at + 1;
                continue;
            }
            let body = &rest[prefix.len()..];
            match body.iter().take(MAX_MARKER_BODY).position(|b| *b == SEP) {
                Some(end) => match parse_marker(&body[..end]) {
                    Some(marker) => {
                        out(marker);
                        i = at + prefix.len() + end + 1;
                    }
                    None => {
                        out(Piece::Data(&data[at..at + 1]));
                        i = at + 1;
                    }
                },
                None if body.len() < MAX_MARKER_BODY => {
                    self.carry = rest.to_vec();
                    return;
                }
                None => {
                    out(Piece::Data(&data[at..at + 1]));
                    i = at + 1;
                }
            }
        }
    }
}

fn index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

/// The session shell's supervisor part: sends each byte to the session's record and to the
/// running command's, and ends commands at their end markers.
pub struct Router {
    shared: Arc<Shared>,
    prefix: Vec<u8>,
    scan: [Scanner; 2],
    /// Per stream: between the current command's begin and end markers.
    inside: [bool; 2],
    /// Per stream: past the current command's end marker (or closed).
    done: [bool; 2],
    status: Option<i32>,
}

impl Router {
    fn new(shared: Arc<Shared>) -> Router {
        let mut prefix = vec![SEP];
        prefix.extend_from_slice(b"CUBA");
        prefix.extend_from_slice(shared.nonce.as_bytes());
        Router {
            shared,
            prefix,
            scan: Default::default(),
            inside: [false; 2],
            done: [false; 2],
            status: None,
        }
    }

    pub fn current(&self) -> Option<Arc<Proc>> {
        self.shared.current().clone()
    }

    /// Output of the shell: into the session's record and the running command's.
    pub fn feed(&mut self, d: &Daemon, shell: &Proc, stream: Stream, bytes: &[u8]) {
        let i = index(stream);
        let current = self.current();
        // Out of `self` while the closure below updates it.
        let mut scanner = std::mem::take(&mut self.scan[i]);
        let prefix = std::mem::take(&mut self.prefix);
        let mut wrote = false;
        let mut ended = false;
        scanner.feed(&prefix, bytes, |piece| match piece {
            Piece::Data(data) => {
                shell.lock().output.append(stream, data);
                if let (Some(cmd), true) = (&current, self.inside[i]) {
                    let mut c = cmd.lock();
                    c.output.append(stream, data);
                    c.last_output = std::time::Instant::now();
                    if c.info.state == ProcState::WaitingInput {
                        c.info.state = ProcState::Running;
                    }
                    wrote = true;
                }
            }
            Piece::Begin(id) if current.as_ref().is_some_and(|c| c.id == id) => {
                self.inside[i] = true;
            }
            Piece::End(id, status) if current.as_ref().is_some_and(|c| c.id == id) => {
                self.inside[i] = false;
                self.done[i] = true;
                if stream == Stream::Stdout {
                    self.status = Some(status);
                }
                ended = self.done == [true, true];
            }
            // A marker of a command that is no longer current: nothing to route.
            Piece::Begin(_) | Piece::End(..) => {}
        });
        self.scan[i] = scanner;
        self.prefix = prefix;
        if let (Some(cmd), true) = (&current, wrote) {
            cmd.notify();
        }
        if ended {
            self.complete(d);
        }
    }

    /// A stream of the shell closed: it will carry no end marker.
    pub fn closed(&mut self, d: &Daemon, shell: &Proc, stream: Stream) {
        let i = index(stream);
        let rest = self.scan[i].flush();
        if !rest.is_empty() {
            shell.lock().output.append(stream, &rest);
            if let (Some(cmd), true) = (self.current(), self.inside[i]) {
                cmd.lock().output.append(stream, &rest);
                cmd.notify();
            }
        }
        self.inside[i] = false;
        self.done[i] = true;
        if self.done == [true, true] && self.status.is_some() {
            self.complete(d);
        }
    }

    /// Both streams passed the end marker: the command is done, with the status it printed.
    fn complete(&mut self, d: &Daemon) {
        let status = self.status.take();
        self.reset();
        let Some(cmd) = self.shared.current().take() else {
            return;
        };
        // The status the shell printed (128 + n for a command killed by signal n).
        end_command(d, &cmd, status, None, None);
    }

    fn reset(&mut self) {
        self.inside = [false; 2];
        self.done = [false; 2];
        self.status = None;
    }

    /// The shell ended: the command it ran (if any) ends with it.
    pub fn shell_ended(&mut self, d: &Daemon, shell: &Proc) {
        self.reset();
        let Some(cmd) = self.shared.current().take() else {
            return;
        };
        let (stop, exit_code, signal) = {
            let s = shell.lock();
            (s.stop, s.info.exit_code, s.info.signal)
        };
        {
            let mut c = cmd.lock();
            if c.stop.is_none() {
                c.stop = stop;
            }
        }
        let why = match stop {
            Some(_) => "the session was stopped while the command ran".to_string(),
            None => format!(
                "the session's shell ended while the command ran (it exited or was killed); \
                 session {} starts again on next use",
                self.shared.name
            ),
        };
        end_command(d, &cmd, exit_code, signal, Some(why));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(prefix: &[u8], reads: &[&[u8]]) -> Vec<String> {
        let mut s = Scanner::default();
        let mut out = Vec::new();
        let mut data = Vec::new();
        for r in reads {
            s.feed(prefix, r, |p| match p {
                Piece::Data(d) => data.extend_from_slice(d),
                Piece::Begin(id) => {
                    out.push(format!("data:{}", String::from_utf8_lossy(&data)));
                    data.clear();
                    out.push(format!("begin:{id}"));
                }
                Piece::End(id, st) => {
                    out.push(format!("data:{}", String::from_utf8_lossy(&data)));
                    data.clear();
                    out.push(format!("end:{id}:{st}"));
                }
            });
        }
        data.extend(s.flush());
        out.push(format!("data:{}", String::from_utf8_lossy(&data)));
        out
    }

    const P: &[u8] = b"\x1eCUBAab12";

    #[test]
    fn markers_are_found_in_one_read_and_across_reads() {
        let whole: &[u8] = b"x\x1eCUBAab12B7\x1ehello\x1eCUBAab12E7:3\x1ey";
        let want = vec!["data:x", "begin:7", "data:hello", "end:7:3", "data:y"];
        assert_eq!(run(P, &[whole]), want);
        // Cut at every position: the same pieces.
        for cut in 0..whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(run(P, &[a, b]), want, "cut at {cut}");
        }
        // One byte at a time.
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(run(P, &bytes), want);
    }

    #[test]
    fn lookalikes_are_data() {
        let cases: &[&[u8]] = &[
            b"a\x1eb",
            b"\x1eCUBAzz99B1\x1e",
            b"\x1eCUBAab12X1\x1e",
            b"\x1eCUBAab12B\x1e",
            b"\x1eCUBAab12E1\x1e",
        ];
        for case in cases {
            let got = run(P, &[case]);
            assert_eq!(
                got,
                vec![format!("data:{}", String::from_utf8_lossy(case))],
                "{case:?}"
            );
        }
        // A prefix cut at the end of the stream stays carried (the rest may come).
        let mut s = Scanner::default();
        s.feed(P, b"ok\x1eCUB", |_| {});
        assert_eq!(s.carry, b"\x1eCUB");
    }

    #[test]
    fn partial_lines_keep_their_bytes() {
        let got = run(P, &[b"\x1eCUBAab12B1\x1eno newline\x1eCUBAab12E1:0\x1e"]);
        assert_eq!(
            got,
            vec!["data:", "begin:1", "data:no newline", "end:1:0", "data:"]
        );
    }

    #[test]
    fn run_line_and_script_quote_paths_and_values() {
        let line = run_line("n0", 5, Path::new("/tmp/it's/5.sh"));
        assert!(line.contains(r"printf '\036CUBAn0B5\036'"), "{line}");
        assert!(line.contains(r". '/tmp/it'\''s/5.sh'"), "{line}");
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let req = SpawnRequest {
            command: "echo $A".into(),
            cwd: Some("sub dir".into()),
            env: vec![("A".into(), "x'y".into())],
            ..SpawnRequest::default()
        };
        let text = script_text(&req, Path::new("/w"));
        assert_eq!(
            text,
            "cd -- '/w/sub dir' || return 1\nexport A='x'\\''y'\necho $A\n"
        );
    }
}
