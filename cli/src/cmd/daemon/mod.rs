//! `daemon status|start|stop|restart|upgrade|reload`: the cubad supervisor itself.

mod reload;
mod restart;
mod start;
mod status;
mod stop;
mod upgrade;

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use crate::ctx::Ctx;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Version, pid, uptime, machine, socket, state dir, clients connected, processes. Does
    /// not start the daemon on this machine; exits 1 when it is not running. (On another
    /// host, --host, its bridge starts one when none runs.)
    Status(status::Args),
    /// Start the daemon (other commands start it on their own when needed).
    Start,
    /// Stop the daemon. Refuses while processes run, unless --force. On another host it is
    /// asked through the bridge, and this returns once it has closed the link.
    Stop(stop::Args),
    /// Restart the daemon in place, keeping every running process: the
    /// same program re-executed (also after installing a new version over it). --kill stops
    /// the processes and starts a fresh daemon instead (also one of another protocol version).
    Restart(restart::Args),
    /// Hand the running daemon over to a new cubad binary in place (same pid): running
    /// processes, their output, stdin, terminals and timers carry on; clients reconnect.
    Upgrade(upgrade::Args),
    /// Put hand edits of approvals.toml and tokens.toml in effect (nothing else makes the
    /// daemon read them again), and say how config.toml differs from what the daemon runs on
    /// (`restart` applies that). Refused from inside a command cuba-exec runs.
    Reload,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    match args.action {
        Action::Status(a) => status::run(ctx, a).await,
        Action::Start => start::run(ctx).await,
        Action::Stop(a) => stop::run(ctx, a).await,
        Action::Restart(a) => restart::run(ctx, a).await,
        Action::Upgrade(a) => upgrade::run(ctx, a).await,
        Action::Reload => reload::run(ctx).await,
    }
}

/// True when a connect error means no daemon listens there.
pub fn absent(e: &cuba_protocol::client::ClientError) -> bool {
    matches!(
        e,
        cuba_protocol::client::ClientError::Connect { source, .. }
            if matches!(source.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused)
    )
}
