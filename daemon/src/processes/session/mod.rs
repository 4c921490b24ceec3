//! Persistent shell sessions: `run(command, session = "dev")` runs in a long-lived shell named
//! `dev`, so `cd`, exports, functions and activated environments carry over, while each command
//! still gets a record of its own (output, exit code, times, timeout).
//!
//! The shell (bash when present, else sh) reads commands from a pipe of its own, fd 3
//! (`shell.rs`). A command is written to a script file and one line is sent that prints a begin
//! marker on both streams, sources the file, and prints an end marker with the status on both
//! streams (`script.rs`, `marker.rs`). The command is done when both streams have passed its end
//! marker, so no stderr byte arrives after it ended (`router.rs`).
//!
//! Interrupting (SIGINT, a timeout) signals the shell's group with SIGINT: the command's
//! processes die as on Ctrl-C, and the shell's trap ends the sourced file (`return 130`) and
//! carries on with the end marker; the session stays usable. What ignores that gets SIGKILL
//! after the grace period, and if the shell itself is stuck, the session is stopped (and
//! started again on next use, with a notice).

mod marker;
mod router;
mod script;
mod shell;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cuba_protocol::{ErrorKind, ProcKind, ProcessInfo, ProtocolError, SpawnRequest};
use tokio::sync::oneshot;

use crate::processes::launch::{Confinement, Launcher};
use crate::state::caller::Caller;
use crate::state::record::{Control, Outcome, Proc, StdinMsg, Writer};
use crate::state::table::{NewRecord, Reserved};
use shell::{Session, Shared};

const MAX_SESSION_NAME: usize = 64;

/// The daemon's sessions by name.
pub struct Sessions {
    launcher: Launcher,
    /// Lock order: this map, then a session's current command, then the table.
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    pub fn new(launcher: Launcher) -> Sessions {
        Sessions {
            launcher,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The idle sessions, for an in-place upgrade: `(shell id, name, nonce, command pipe,
    /// confinement)`. A session running a command is not among them.
    pub fn idle(&self) -> Vec<(u64, String, String, std::os::fd::RawFd, Confinement)> {
        self.map()
            .values()
            .filter(|s| s.shared.current().is_none() && !s.shell.lock().finished())
            .filter_map(|s| {
                let sh = &s.shared;
                Some((
                    s.shell.id,
                    sh.name.clone(),
                    sh.nonce.clone(),
                    sh.raw()?,
                    sh.confinement.clone(),
                ))
            })
            .collect()
    }

    /// Takes over session `name` whose shell (record `shell`) an earlier program of this
    /// daemon started: its command pipe and nonce as they were. Returns the route for the
    /// shell's supervisor.
    pub fn adopt(
        &self,
        shell: Arc<Proc>,
        (name, nonce): (String, String),
        commands: std::os::fd::OwnedFd,
        confinement: Confinement,
    ) -> Box<dyn crate::processes::supervise::Route> {
        let shared = Arc::new(Shared::new(name.clone(), nonce, confinement, commands));
        let router = router::Router::new(shared.clone(), self.launcher.table().clone());
        self.map().insert(name, Session { shell, shared });
        Box::new(router)
    }

    /// Whether the session whose shell is record `shell_id` runs a command now.
    pub fn busy(&self, shell_id: u64) -> bool {
        self.map()
            .values()
            .find(|s| s.shell.id == shell_id)
            .is_some_and(|s| s.shared.current().is_some())
    }

    /// Runs `req.command` in the session `req.session`, starting the session's shell first
    /// when it has none (or its shell has ended). Policy and side effects are checked by the
    /// caller (`unresolved`: what it could not resolve, for the audit); `cwd` is where a new
    /// shell starts.
    pub fn run(
        &self,
        caller: &Caller,
        req: SpawnRequest,
        cwd: &Path,
        unresolved: Vec<String>,
    ) -> Result<ProcessInfo, ProtocolError> {
        let name = check(&req)?;
        let (Session { shell, shared }, notice) = self.shell_for(caller, &req, cwd, &name)?;
        let mut current = shared.current();
        if let Some(busy) = current.as_ref() {
            let info = busy.info();
            return Err(ProtocolError::invalid_state(format!(
                "session {name} is busy with process {} ({}); wait for it, interrupt it \
                 (SIGINT to process {}), or use another session",
                info.id,
                script::preview(&info.command),
                info.id
            )));
        }
        let cmd = self.hand_over(caller, &req, cwd, (&shell, &shared), (notice, unresolved))?;
        let info = cmd.info();
        if !info.state.is_finished() {
            *current = Some(cmd);
        }
        Ok(info)
    }

    /// The live shell of session `name`, started (again) if it has none: with the notice that
    /// tells the caller so.
    fn shell_for(
        &self,
        caller: &Caller,
        req: &SpawnRequest,
        cwd: &Path,
        name: &str,
    ) -> Result<(Session, Option<String>), ProtocolError> {
        let mut map = self.map();
        let live = map
            .get(name)
            .filter(|s| !s.shell.lock().finished())
            .cloned();
        if let Some(session) = live {
            if session.shell.lock().tenant != caller.tenant {
                // Another confined caller's shell (or a confined caller at a shared one): told
                // as a name taken, not whose.
                return Err(ProtocolError::new(
                    ErrorKind::Denied,
                    format!("session {name} is another client's; use another session name"),
                ));
            }
            if session.shared.confinement != self.launcher.confinement(caller) {
                return Err(ProtocolError::new(
                    ErrorKind::Denied,
                    format!(
                        "session {name} runs under a different sandbox than this client's; use \
                         another session name"
                    ),
                ));
            }
            return Ok((session, None));
        }
        let before = map.get(name).map(|s| s.shell.info());
        let session = shell::start(&self.launcher, caller, req, cwd, name)?;
        let info = session.shell.info();
        let notice = match before {
            Some(old) => format!(
                "session {name} was started again (new shell, pid {}): its shell had ended \
                 ({}); cd, exports and functions of before are gone",
                info.pid,
                script::ended_how(&old)
            ),
            None => format!(
                "session {name} started ({}, pid {})",
                info.command, info.pid
            ),
        };
        map.insert(name.to_string(), session.clone());
        // Sessions whose shell ended and whose record is gone from the table are forgotten:
        // one a name per task must not keep a record's memory for ever.
        let table = self.launcher.table();
        map.retain(|_, s| {
            // The shell's lock is let go before the table's is taken (the table locks records).
            let ended = s.shell.lock().finished();
            !ended || table.get(s.shell.id).is_ok()
        });
        Ok((session, Some(notice)))
    }

    /// A record for the command, its script written and its line sent to the shell: with the
    /// right to write it, which the session keeps while it runs. The record comes back
    /// finished when the shell did not take it.
    fn hand_over(
        &self,
        caller: &Caller,
        req: &SpawnRequest,
        cwd: &Path,
        (shell, shared): (&Arc<Proc>, &Arc<Shared>),
        (notice, unresolved): (Option<String>, Vec<String>),
    ) -> Result<Writer, ProtocolError> {
        let name = &shared.name;
        let (shell_pid, shell_root, stdin, control) = {
            let s = shell.lock();
            let handles = (s.root.clone(), s.stdin.clone(), s.control.clone());
            (s.info().pid, handles.0, handles.1, handles.2)
        };
        let (Some(root), Some(stdin), Some(control)) = (shell_root, stdin, control) else {
            return Err(ProtocolError::invalid_state(format!(
                "session {name} has no running shell; run the command again"
            )));
        };
        // The shell's working directory now: where the command will run.
        let here = crate::platform::proc::cwd(shell_pid).unwrap_or(cwd.to_path_buf());
        let table = self.launcher.table();
        let new = NewRecord {
            kind: ProcKind::InSession,
            tenant: caller.tenant.clone(),
            ..NewRecord::of(caller.owner(), req, &here)
        };
        // Never an existing one: a command in a session is not reused.
        let Reserved::New(cmd) = table.reserve(new, false)? else {
            return Err(ProtocolError::invalid_state(
                "a command in a session is never reused",
            ));
        };
        let sent = send_command(
            shared,
            req,
            cwd,
            &table.state_dir().script(cmd.id),
            cmd.id,
            &stdin,
        );
        {
            let mut c = cmd.lock();
            c.set_pid(shell_pid);
            c.set_notice(notice);
            c.started();
            c.policy = Some(caller.policy.clone());
            c.unresolved = unresolved;
            if sent.is_ok() {
                c.stdin = Some(stdin);
                c.control = Some(control.clone());
            }
        }
        table.started(caller.who(), &cmd, root.start_time);
        if let Err(reason) = sent {
            let why = format!("cannot hand the command to session {name}: {reason}");
            router::end_command(
                table,
                &cmd,
                Outcome::of_command(None, None, None, Some(why)),
            );
            return Ok(cmd);
        }
        // A new command: the shell's quiet period (for waiting-for-input) starts again.
        let (done, _) = oneshot::channel();
        let _ = control.try_send(Control::Input {
            id: shell.id,
            eof: false,
            done,
        });
        if let Some(t) = req.timeout_ms {
            let id = cmd.id;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(t)).await;
                let _ = control.send(Control::CommandTimeout(id)).await;
            });
        }
        table.changed();
        Ok(cmd)
    }
}

/// Command `id`'s script (the request's text in `cwd`) written to `script`, its line sent to the
/// shell, and its `stdin` text queued.
fn send_command(
    shared: &Shared,
    req: &SpawnRequest,
    cwd: &Path,
    script: &Path,
    id: u64,
    stdin: &tokio::sync::mpsc::Sender<StdinMsg>,
) -> Result<(), String> {
    crate::processes::launch::write_script(script, script::script_text(req, cwd).as_bytes())
        .and_then(|_| shared.send(&script::run_line(&shared.nonce, id, script)))
        .map_err(|e| format!("the session's shell does not take commands: {e}"))?;
    match req.stdin.clone() {
        Some(bytes) => stdin
            .try_send(StdinMsg::Data(bytes))
            .map_err(|_| "the session's input queue is full".to_string()),
        None => Ok(()),
    }
}

/// The session's name, if the request can run in one.
fn check(req: &SpawnRequest) -> Result<String, ProtocolError> {
    let name = req.session.clone().unwrap_or_default();
    if name.is_empty()
        || name.len() > MAX_SESSION_NAME
        || name.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(ProtocolError::bad_request(format!(
            "session name {name:?} is invalid: 1 to {MAX_SESSION_NAME} characters, no spaces or \
             control characters"
        )));
    }
    if req.tty.is_some() {
        return Err(ProtocolError::bad_request(
            "a session runs on pipes: tty cannot be combined with session (start a tty process \
             running a shell instead)",
        ));
    }
    if req.close_stdin {
        // `stdin` text is fine (it goes to the shell's stdin); closing it would end the session.
        return Err(ProtocolError::bad_request(
            "stdin cannot be closed for a command in a session: the session's shell reads it",
        ));
    }
    Ok(name)
}
