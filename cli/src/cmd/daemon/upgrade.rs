//! `daemon upgrade`: the running cubad re-executes a new binary in place (same pid), handing it
//! every running process. The connection closes; this reconnects until the new program
//! answers, and reports what it kept, or why the old one is still serving.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use cuba_protocol::client::ClientError;
use cuba_protocol::{Request, Response, UpgradeRequest};

use crate::ctx::Ctx;
use crate::exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The cubad to hand over to [default: the program the daemon runs from, e.g. a version
    /// installed over it]. An absolute path on the daemon's machine.
    #[arg(long, value_name = "PATH")]
    binary: Option<PathBuf>,
}

/// How long the new program may take to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);
const RETRY: Duration = Duration::from_millis(20);

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let binary = match args.binary {
        Some(b) if b.is_relative() => Some(std::env::current_dir()?.join(b)),
        b => b,
    };
    match in_place(ctx, binary, "upgraded").await? {
        Some(code) => Ok(code),
        None => bail!("no cubad is running to upgrade (`cubactl daemon start` starts one)"),
    }
}

/// Upgrades in place; `None` when no daemon runs, or it speaks another protocol version (it
/// cannot be handed over: the caller stops and starts instead).
pub async fn in_place(ctx: &Ctx, binary: Option<PathBuf>, done: &str) -> Result<Option<ExitCode>> {
    let client = match existing(ctx).await {
        Ok(c) => c,
        Err(ClientError::Connect { .. })
        | Err(ClientError::Handshake(_))
        | Err(ClientError::Bridge { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let before = client.status().await?;
    let request = UpgradeRequest {
        binary: binary.map(|b| b.display().to_string()),
    };
    let changes = match client.call(Request::Upgrade(request)).await {
        Ok(Response::Upgrading(c)) => c.lines,
        Ok(Response::Ok) | Err(ClientError::Closed) => Vec::new(),
        Ok(Response::Error(e)) | Err(ClientError::Remote(e)) => {
            eprintln!("cubactl: {}", e.message);
            eprintln!("cubad (pid {}) carries on as it was", before.pid);
            return Ok(Some(exit::failed()));
        }
        Ok(other) => bail!("unexpected reply to the upgrade: {other:?}"),
        Err(e) => return Err(e.into()),
    };
    drop(client);
    ctx.forget().await;
    let deadline = tokio::time::Instant::now() + ANSWER_WITHIN;
    loop {
        if let Ok(c) = existing(ctx).await {
            if let Ok(s) = c.status().await {
                if s.upgrades > before.upgrades {
                    outln!(
                        "cubad {done} in place (pid {}, {} → {}): {} running process(es) kept",
                        s.pid,
                        before.daemon_version,
                        s.daemon_version,
                        s.running
                    )?;
                    for line in &changes {
                        outln!("  read again: {line}")?;
                    }
                    return Ok(Some(ExitCode::SUCCESS));
                }
                if let Some(why) = &s.upgrade_failed {
                    eprintln!("cubactl: the upgrade did not happen: {why}");
                    eprintln!("cubad (pid {}) carries on as it was", s.pid);
                    return Ok(Some(exit::failed()));
                }
            }
        }
        ctx.forget().await;
        if !ctx.is_remote() && gone(ctx, before.pid)? {
            bail!(
                "cubad (pid {}) ended during the hand-over, before the new program answered; \
                 the next cubad (`cubactl daemon start`) ends the processes it ran and lists \
                 them as lost; see cubad.log in {}",
                before.pid,
                before.state_dir
            );
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the upgraded cubad did not answer within {}s",
                ANSWER_WITHIN.as_secs()
            );
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Whether the daemon of pid `pid` no longer holds the socket's lock (it keeps the lock across
/// its own re-execution, so a free lock means it is gone).
fn gone(ctx: &Ctx, pid: u32) -> Result<bool> {
    let holder = crate::daemon_proc::lock_holder(&ctx.socket)?;
    Ok(holder != i32::try_from(pid).ok())
}

/// The daemon aimed at, if one runs: this machine's (never started here), or another host's
/// through its bridge.
async fn existing(ctx: &Ctx) -> Result<cuba_protocol::client::Client, ClientError> {
    match ctx.is_remote() {
        true => ctx.connect_to(ctx.host.as_deref()).await,
        false => ctx.connect_existing().await,
    }
}
