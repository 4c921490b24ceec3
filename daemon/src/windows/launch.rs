//! Starting a command: the checks (policy, side effects, what Windows lacks), its record, its
//! shell's command line, environment and working directory, its Job Object, then its pipes
//! (`pipes.rs`) or its pseudo console (`tty.rs`), and its timeout.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuba_protocol::{
    now_ms, ErrorKind, ProcState, ProcessInfo, ProtocolError, SpawnRequest, StartFailure,
};

use super::client::Client;
use super::plan::Plan;
use super::table::{Data, Rec, Stop};
use super::Daemon;
use crate::new_record::NewRecord;
use crate::output::{Output, Spool};
use crate::platform::win_shell::{self, Kind};
use crate::platform::windows::job::{Job, Limits};
use crate::side_effects::{self, Refusal};

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
                last_input: Instant::now(),
                stdin: None,
                job: None,
                stop: None,
                pty: None,
                screen: None,
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
    let plan = Plan {
        shell: &shell,
        kind,
        req: &req,
        cwd: &cwd,
        env: &env,
    };
    match launch(d, &rec, &plan) {
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
    match req.session.is_some() {
        true => Err(ProtocolError::unsupported(
            "shell sessions",
            ": run each command on its own (use `&&` to chain)",
        )),
        false => Ok(()),
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

/// Starts the command of `plan` in a job of its own, on pipes or a pseudo console, and arms
/// its timeout.
fn launch(d: &Arc<Daemon>, rec: &Arc<Rec>, plan: &Plan) -> std::io::Result<()> {
    if !plan.cwd.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "the working directory {} does not exist",
                plan.cwd.display()
            ),
        ));
    }
    let limits = Limits {
        processes: d
            .config
            .limits
            .pids_max
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        memory: d.config.limits.memory_max,
    };
    let job = Arc::new(Job::new(limits)?);
    rec.lock().info.pids_max = limits.processes.map(u64::from);
    match plan.req.tty {
        Some(size) => super::tty::launch(rec, plan, job, size)?,
        None => super::pipes::launch(rec, plan, job)?,
    }
    let req = plan.req;
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
            super::stop::stop(&rec, Stop::Timeout, cuba_protocol::Signal::Term, grace);
        });
    }
    Ok(())
}
