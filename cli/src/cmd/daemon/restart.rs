//! `daemon restart`: in place, keeping every process (an upgrade to the same program), when the
//! running daemon can; with `--kill` (or when it cannot: not running, another protocol
//! version) stop it, its processes gracefully, then start. Works on a daemon of another
//! protocol version too, through the pid in its lock file. On another host: the shutdown
//! request, then connecting again until a new daemon answers there.

use std::process::ExitCode;

use anyhow::{bail, Result};

use super::stop::{self, Stopped};
use crate::ctx::Ctx;
use crate::exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Stop the running processes (gracefully: TERM, grace period, KILL) and start a fresh
    /// daemon, instead of re-executing it in place with its processes.
    #[arg(long, alias = "force")]
    pub kill: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    if !args.kill {
        if let Some(code) = super::upgrade::in_place(ctx, None, "restarted").await? {
            return Ok(code);
        }
    }
    let old = match stop::stop_daemon(ctx, true).await? {
        Stopped::Refused(why) => {
            eprintln!("cubactl: not restarting: {why}");
            return Ok(exit::failed());
        }
        Stopped::NotRunning => None,
        Stopped::Done { pid, processes } => {
            outln!("{}", stop::stopped_line(pid, processes))?;
            Some(pid)
        }
        Stopped::Closed { pid, processes } => {
            outln!("{}", stop::closed_line(ctx, pid, processes))?;
            Some(pid)
        }
    };
    match (ctx.is_remote(), old) {
        (true, Some(old)) => reconnect(ctx, old).await,
        _ => super::start::started(ctx, "started").await,
    }
}

/// Connects to another host until a daemon other than `old` answers: the old one may still
/// be stopping its processes, and a bridge that reached it then ends without a welcome.
async fn reconnect(ctx: &Ctx, old: i32) -> Result<ExitCode> {
    let deadline = tokio::time::Instant::now() + stop::EXIT_LIMIT;
    loop {
        let last = match ctx.connect_to(ctx.host.as_deref()).await {
            Ok(c) if c.welcome().daemon_pid as i32 != old => {
                return super::start::remote(ctx, "started cubad on").await
            }
            Ok(_) => format!("cubad (pid {old}) still answers"),
            Err(e) => e.to_string(),
        };
        ctx.forget().await;
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "no new cubad answered on host {} within {}s: {last}",
                ctx.host_name(),
                stop::EXIT_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Between two attempts to reach the new daemon.
const RETRY: std::time::Duration = std::time::Duration::from_millis(200);
