//! A session's shell: its record (kind `session`), the pipe it reads commands from, and what
//! it shares with the requests that run commands in it.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use cuba_protocol::{ErrorKind, ProcKind, ProtocolError, SpawnRequest};

use super::router::Router;
use super::script;
use crate::processes::launch::{Confinement, LaunchPlan, Launcher};
use crate::state::caller::Caller;
use crate::state::record::{Proc, Writer};
use crate::state::table::{NewRecord, Reserved};

/// What a session's shell shares with the requests that run commands in it.
pub struct Shared {
    pub name: String,
    pub nonce: String,
    /// The command running now, with the right to write its record (the shell's supervisor
    /// writes it through the router); `None` while the shell waits for the next one.
    current: Mutex<Option<Writer>>,
    /// The sandbox its shell runs in: another client may use the session only if its own
    /// confinement is the same.
    pub confinement: Confinement,
    /// The write end of the pipe the shell reads its commands from (non-blocking); `None` once
    /// the shell ended (a session's name must not hold a descriptor for ever).
    commands: Mutex<Option<std::fs::File>>,
}

impl Shared {
    pub fn new(
        name: String,
        nonce: String,
        confinement: Confinement,
        commands: std::os::fd::OwnedFd,
    ) -> Shared {
        Shared {
            name,
            nonce,
            current: Mutex::new(None),
            confinement,
            commands: Mutex::new(Some(std::fs::File::from(commands))),
        }
    }

    fn pipe(&self) -> MutexGuard<'_, Option<std::fs::File>> {
        self.commands.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The command pipe's descriptor (kept open across an in-place upgrade); `None` once the
    /// shell ended.
    pub fn raw(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.pipe().as_ref().map(|f| f.as_raw_fd())
    }

    /// The shell ended: its command pipe is closed (nothing reads it any more).
    pub fn close(&self) {
        self.pipe().take();
    }

    pub fn current(&self) -> MutexGuard<'_, Option<Writer>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands the shell one line of commands. A line is far shorter than the pipe's atomic
    /// write size and the shell reads it at once; a full pipe means the shell is not reading.
    pub fn send(&self, line: &str) -> std::io::Result<()> {
        use std::io::Write;
        match self.pipe().as_mut() {
            Some(pipe) => pipe.write_all(line.as_bytes()),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the session's shell has ended",
            )),
        }
    }
}

/// A live session: its shell's record and what the shell shares.
#[derive(Clone)]
pub struct Session {
    pub shell: Arc<Proc>,
    pub shared: Arc<Shared>,
}

/// The shell for a new session: the caller's, else bash when installed, else the daemon's.
fn session_shell(default: &str, req: &SpawnRequest) -> String {
    if let Some(shell) = &req.shell {
        return shell.clone();
    }
    ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .map_or_else(|| default.to_string(), str::to_string)
}

/// Starts the shell of session `name` in `cwd` with the caller's environment, its supervisor
/// routing output by markers.
pub fn start(
    launcher: &Launcher,
    caller: &Caller,
    req: &SpawnRequest,
    cwd: &Path,
    name: &str,
) -> Result<Session, ProtocolError> {
    let shell = session_shell(launcher.shell(), req);
    let table = launcher.table();
    let new = NewRecord {
        owner: caller.owner(),
        name: Some(name.to_string()),
        command: shell.clone(),
        cwd: cwd.display().to_string(),
        timeout_ms: None,
        kind: ProcKind::Session,
        tty: None,
        session: Some(name.to_string()),
        // The shell is made for the session, not by the request: its token names the command.
        token: None,
        tenant: caller.tenant.clone(),
        port: None,
    };
    let internal = |e: std::io::Error| {
        ProtocolError::new(
            ErrorKind::Internal,
            format!("cannot make the command pipe of session {name}: {e}"),
        )
    };
    // Both ends close-on-exec (the shell gets the read end as fd 3 explicitly), the write end
    // non-blocking.
    let (read, write) = crate::platform::pipe::pipe().map_err(internal)?;
    crate::base::fd::set_nonblocking(&write).map_err(internal)?;
    let confinement = launcher.confinement(caller);
    let shared = Arc::new(Shared::new(
        name.to_string(),
        script::nonce(),
        confinement.clone(),
        write,
    ));
    // The shell's first line: the pipe's extra descriptor is not for its commands to inherit;
    // aliases work as typed.
    shared
        .send("exec 3<&-; shopt -s expand_aliases 2>/dev/null\n")
        .map_err(internal)?;
    // Reserved once nothing else can fail before its launch, which ends it if that fails.
    let Reserved::New(p) = table.reserve(new, false)? else {
        return Err(ProtocolError::invalid_state(
            "a session's shell is never reused",
        ));
    };
    let shell_record = p.proc().clone();
    let router = Router::new(shared.clone(), table.clone());
    let marker = table.marker(p.id);
    let plan = LaunchPlan::session_shell(p.id, shell, read, caller, cwd, confinement, &marker);
    launcher
        .launch(caller, p, plan, Some(Box::new(router)))
        .map_err(|reason| {
            ProtocolError::invalid_state(format!(
                "cannot start the shell of session {name}: {reason}"
            ))
        })?;
    Ok(Session {
        shell: shell_record,
        shared,
    })
}
