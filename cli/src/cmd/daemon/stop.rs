//! `daemon stop`: ask cubad to shut down, refusing while processes run unless `--force`; a
//! daemon that speaks another protocol version is stopped with SIGTERM to the pid in its lock.
//! Another host's daemon (`--host`) is asked through its bridge; its pid and lock are not this
//! machine's, so the end of the link is all there is to wait for.

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
pub const EXIT_LIMIT: Duration = Duration::from_secs(60);
/// How often the end of another host's link is looked for.
pub const POLL: Duration = Duration::from_millis(50);

pub enum Stopped {
    NotRunning,
    Done {
        pid: i32,
        processes: usize,
    },
    /// Another host's daemon accepted the shutdown and closed the link.
    Closed {
        pid: i32,
        processes: usize,
    },
    Refused(String),
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    match stop_daemon(ctx, args.force).await? {
        Stopped::NotRunning => outln!("cubad is not running")?,
        Stopped::Done { pid, processes } => outln!("{}", stopped_line(pid, processes))?,
        Stopped::Closed { pid, processes } => outln!("{}", closed_line(ctx, pid, processes))?,
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

/// What a remote daemon's accepted shutdown is: it stops its processes, then exits there.
pub fn closed_line(ctx: &Ctx, pid: i32, processes: usize) -> String {
    let host = ctx.host_name();
    match processes {
        0 => format!("stopped cubad on host {host} (pid {pid})"),
        n => format!(
            "cubad on host {host} (pid {pid}) is shutting down: it stops {n} process(es), then \
             exits"
        ),
    }
}

pub async fn stop_daemon(ctx: &Ctx, force: bool) -> Result<Stopped> {
    if ctx.is_remote() {
        // The bridge starts a daemon there if none runs: there is always one to ask.
        let client = ctx.connect().await?;
        let (pid, processes) = match by_request(ctx, &client, force).await? {
            Ok(stopping) => stopping,
            Err(refused) => return Ok(refused),
        };
        wait_closed(ctx, &client).await?;
        ctx.forget().await;
        return Ok(Stopped::Closed { pid, processes });
    }
    match ctx.connect_existing().await {
        Ok(client) => match by_request(ctx, &client, force).await? {
            Ok((pid, processes)) => {
                wait_gone(pid).await?;
                Ok(Stopped::Done { pid, processes })
            }
            Err(refused) => Ok(refused),
        },
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

/// Asks for the shutdown: the daemon's pid and how many processes it stops, or the refusal.
async fn by_request(
    ctx: &Ctx,
    client: &Client,
    force: bool,
) -> Result<Result<(i32, usize), Stopped>> {
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
            return Ok(Err(Stopped::Refused(format!(
                "{} process(es) still running: {}; `{} kill --all` stops them, or add \
                 --force to stop them (TERM, grace period, KILL) along with the daemon",
                running.len(),
                running.join(", "),
                ctx.cubactl()
            ))));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(Ok((pid, running.len())))
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

/// Waits until another host's daemon closed the link (it does so as it goes down).
async fn wait_closed(ctx: &Ctx, client: &Client) -> Result<()> {
    let deadline = tokio::time::Instant::now() + EXIT_LIMIT;
    while client.is_alive() {
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "cubad on host {} still holds the link {}s after accepting the shutdown; \
                 see its log there",
                ctx.host_name(),
                EXIT_LIMIT.as_secs()
            );
        }
        // The client has no end-of-link event to await; a short poll is cheap.
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

async fn wait_gone(pid: i32) -> Result<()> {
    if !platform::exit::wait_exit(pid, EXIT_LIMIT).await? {
        bail!(
            "cubad (pid {pid}) is still running after {}s; see its log, or `{} {pid}`",
            EXIT_LIMIT.as_secs(),
            daemon_proc::FORCE_KILL
        );
    }
    Ok(())
}
