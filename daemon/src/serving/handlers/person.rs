//! The person's verbs on the daemon's own files and services: `Reload` (hand edits of the
//! approvals and tokens put in effect once a person confirms them, the settings file compared
//! with what the daemon runs on), `HttpStop`, and `Authorize` (a verb the client carries out
//! itself). `Upgrade` and `Shutdown` have files of their own; each is refused from inside a
//! process tree (`super::person`).

use cuba_protocol::{Changes, ErrorKind, ProtocolError, Response, Verb};

use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

/// How the person's files differ from what the daemon uses now: the settings file (read again
/// at a restart), and the approvals and tokens edited by hand and not yet reloaded. For an
/// upgrade's reply (Unix).
#[cfg(unix)]
pub fn changes(d: &Daemon) -> Vec<String> {
    let mut lines = d.config().file_changes(|k| std::env::var(k).ok());
    lines.extend(d.asks().unconfirmed());
    lines.extend(d.bearer().unconfirmed());
    lines
}

pub fn reload(d: &Daemon, caller: &Caller) -> Result<Response, ProtocolError> {
    super::person(
        d,
        caller,
        "daemon reload",
        "reload the daemon's approvals and tokens",
    )?;
    let mut lines = d.asks().reload();
    lines.extend(d.bearer().reload());
    lines.extend(
        d.config()
            .file_changes(|k| std::env::var(k).ok())
            .into_iter()
            .map(|l| format!("{l} (takes effect at `cubactl daemon restart`)")),
    );
    tracing::info!(changes = ?lines, "reloaded by a person");
    Ok(Response::Reloaded(Changes { lines }))
}

pub fn authorize(d: &Daemon, caller: &Caller, verb: Verb) -> Result<Response, ProtocolError> {
    let name = match verb {
        Verb::HttpStart => "http start",
    };
    super::person(d, caller, name, verb.describe())?;
    Ok(Response::Ok)
}

/// Stops the HTTP endpoint of pid `pid` (what its `http.json` names): TERM, once that pid is
/// seen to run `cuba-exec`.
pub fn http_stop(d: &Daemon, caller: &Caller, pid: u32) -> Result<Response, ProtocolError> {
    super::person(d, caller, "http stop", "stop the HTTP endpoint")?;
    let none = || {
        ProtocolError::new(
            ErrorKind::NotFound,
            format!("pid {pid} is not an HTTP endpoint (`cubactl http status`)"),
        )
    };
    let pid = i32::try_from(pid)
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(none)?;
    // A pid reused since `http.json` was written is not signalled: it must run the endpoint.
    let name = crate::platform::proc::name(pid).ok_or_else(none)?;
    if !name.starts_with("cuba-exec") {
        return Err(none());
    }
    #[cfg(unix)]
    let sent = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    );
    // A Ctrl-Break, the endpoint's TERM on Windows.
    #[cfg(windows)]
    let sent = crate::platform::signal::signal_exact(
        pid,
        crate::platform::proc::start_time_of(pid),
        cuba_protocol::Signal::Term.number(),
    );
    sent.map_err(|e| {
        ProtocolError::new(ErrorKind::Internal, format!("cannot stop pid {pid}: {e}"))
    })?;
    Ok(Response::Ok)
}
