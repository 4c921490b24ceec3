//! `daemon stop`: ask cubad to shut down, refusing while processes run unless `--force`; a
//! daemon that speaks another protocol version is stopped with SIGTERM to the pid in its lock.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::handshake::HandshakeError;
use cuba_protocol::{ErrorKind, ListRequest, Request, ShutdownRequest};

use super::absent;
use crate::ctx::Ctx;
use crate::daemon_proc;
use crate::exit;
use crate::platform;
use crate::platform::procs::Snapshot;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Stop running processes first (gracefully: TERM, grace period, KILL) instead of
    /// refusing.
    #[arg(long)]
    pub force: bool,
}

/// How long the daemon may take to exit (a forced stop waits for its processes' grace period).
const EXIT_LIMIT: Duration = Duration::from_secs(60);

pub enum Stopped {
    NotRunning,
    Done { pid: i32, processes: usize },
    Refused(String),
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    match stop_daemon(ctx, args.force).await? {
        Stopped::NotRunning => outln!("cubad is not running")?,
        Stopped::Done { pid, processes } => outln!("{}", stopped_line(pid, processes))?,
        Stopped::Refused(why) => {
            eprintln!("cubactl: {why}");
            return Ok(exit::failed());
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn stopped_line(pid: i32, processes: usize) -> String {
    match processes {
        0 => format!("stopped cubad (pid {pid})"),
        n => format!("stopped {n} process(es), then cubad (pid {pid})"),
    }
}

pub async fn stop_daemon(ctx: &Ctx, force: bool) -> Result<Stopped> {
    match ctx.connect_existing().await {
        Ok(client) => by_request(&client, force).await,
        Err(e) if absent(&e) => Ok(Stopped::NotRunning),
        Err(ClientError::Handshake(HandshakeError::VersionMismatch { daemon, .. })) => {
            match daemon_proc::lock_holder(&ctx.socket)? {
                Some(pid) => by_signal(pid, daemon, force).await,
                None => Ok(Stopped::NotRunning),
            }
        }
        Err(e) => Err(e.into()),
    }
}

async fn by_request(client: &Client, force: bool) -> Result<Stopped> {
    let pid = client.welcome().daemon_pid as i32;
    let running: Vec<String> = client
        .list(ListRequest::default())
        .await?
        .iter()
        .filter(|p| !p.state.is_finished())
        .map(|p| match &p.name {
            Some(n) => format!("{} ({n})", p.id),
            None => p.id.to_string(),
        })
        .collect();
    match client
        .call(Request::Shutdown(ShutdownRequest { force }))
        .await
    {
        Ok(_) => {}
        Err(e) if e.kind() == Some(ErrorKind::InvalidState) => {
            return Ok(Stopped::Refused(format!(
                "{} process(es) still running: {}; `cubactl kill --all` stops them, or add \
                 --force to stop them (TERM, grace period, KILL) along with the daemon",
                running.len(),
                running.join(", ")
            )));
        }
        Err(e) => return Err(e.into()),
    }
    wait_gone(pid).await?;
    Ok(Stopped::Done {
        pid,
        processes: running.len(),
    })
}

async fn by_signal(pid: i32, protocol: u32, force: bool) -> Result<Stopped> {
    let children = Snapshot::take().live_children(pid);
    if children > 0 && !force {
        return Ok(Stopped::Refused(format!(
            "cubad (pid {pid}, protocol version {protocol}) still runs {children} process(es); \
             add --force to stop them (TERM, grace period, KILL) along with the daemon"
        )));
    }
    daemon_proc::terminate(pid)?;
    wait_gone(pid).await?;
    Ok(Stopped::Done {
        pid,
        processes: children,
    })
}

async fn wait_gone(pid: i32) -> Result<()> {
    if !platform::exit::wait_exit(pid, EXIT_LIMIT).await? {
        bail!(
            "cubad (pid {pid}) is still running after {}s; see its log, or `kill -9 {pid}`",
            EXIT_LIMIT.as_secs()
        );
    }
    Ok(())
}
