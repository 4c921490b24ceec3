//! `kill`: stop processes with their whole trees (TERM, grace period, KILL) and say how each
//! one ended; or send another signal.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{ErrorKind, ListRequest, ProcessInfo, Signal, SignalRequest};

use crate::ctx::Ctx;
use crate::describe;
use crate::exit;
use crate::platform::procs::Snapshot;
use crate::target::Target;
use crate::units;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["ids", "all", "owner"])))]
pub struct Args {
    /// Processes: ids (first column of `cubactl ps`) or names.
    #[arg(value_name = "ID|NAME")]
    ids: Vec<Target>,
    /// Every running process.
    #[arg(long)]
    all: bool,
    /// Every running process this owner started (an agent's name, or `cubactl`).
    #[arg(long, value_name = "NAME")]
    owner: Option<String>,
    /// Signal to send: TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT (or SIGTERM, 15…).
    /// TERM, INT, HUP and QUIT are followed by KILL if the tree outlives the grace period.
    #[arg(short = 's', long, default_value = "TERM", value_name = "SIGNAL")]
    signal: Signal,
    /// Grace period before KILL [default: the daemon's, 5s unless configured].
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration)]
    grace: Option<Duration>,
    /// Do not wait for the processes to end; only send the signal.
    #[arg(long)]
    no_wait: bool,
    /// Print the final records as JSON.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// `kill IDS` with every default: TERM, the daemon's grace, waiting for the ends.
    pub fn stop(ids: Vec<Target>, json: bool) -> Args {
        Args {
            ids,
            all: false,
            owner: None,
            signal: Signal::Term,
            grace: None,
            no_wait: false,
            json,
        }
    }
}

fn stops(signal: Signal) -> bool {
    matches!(
        signal,
        Signal::Term | Signal::Int | Signal::Hup | Signal::Quit | Signal::Kill
    )
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let ids = targets(&client, &args).await?;
    if ids.is_empty() {
        if args.json {
            outln!("[]")?;
        }
        let who = args.owner.as_deref().map(|o| format!(" that {o} started"));
        eprintln!("cubactl: nothing is running{}", who.unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    // This machine's process table knows nothing of another host's pids.
    let snapshot = (!ctx.is_remote()).then(Snapshot::take);
    let req = |id| SignalRequest {
        id,
        signal: args.signal,
        escalate: stops(args.signal) && args.signal != Signal::Kill,
        grace_ms: args.grace.map(|g| g.as_millis() as u64),
        wait: stops(args.signal) && !args.no_wait,
    };
    // All at once, so the grace periods overlap.
    let tasks: Vec<_> = ids
        .iter()
        .map(|&id| {
            let c: Client = client.clone();
            let r = req(id);
            tokio::spawn(async move { c.signal(r).await })
        })
        .collect();
    let mut ok = true;
    let mut ended = Vec::new();
    for (task, &id) in tasks.into_iter().zip(&ids) {
        match task.await? {
            // Stopping what has already ended leaves it as asked: said, not a failure.
            Err(e) if stops(args.signal) && e.kind() == Some(ErrorKind::InvalidState) => {
                match client.info(id).await {
                    Ok(p) if p.state.is_finished() => {
                        if !args.json {
                            outln!("process {id} had already ended: {}", describe::sentence(&p))?;
                        }
                        ended.push(p);
                    }
                    _ => {
                        ok = false;
                        eprintln!("cubactl: {}", explain(&e, ctx.host.as_deref()));
                    }
                }
            }
            Ok(p) => {
                let tree = snapshot.as_ref().map_or(0, |s| s.tree(p.pid as i32).len());
                ok &= report(&p, &args, tree)?;
                ended.push(p);
            }
            Err(e) => {
                ok = false;
                // The daemon's message names the process.
                eprintln!("cubactl: {}", explain(&e, ctx.host.as_deref()));
            }
        }
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&crate::json::all(&ended))?
        )?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        exit::failed()
    })
}

/// The ids named on the command line, or the running ones (of an owner).
async fn targets(client: &Client, args: &Args) -> Result<Vec<u64>> {
    let mut ids = Vec::new();
    for t in &args.ids {
        ids.push(t.resolve(client).await?);
    }
    if args.all || args.owner.is_some() {
        let owner = args.owner.clone();
        let list = client
            .list(ListRequest {
                owner,
                ..ListRequest::default()
            })
            .await?;
        ids.extend(list.iter().filter(|p| !p.state.is_finished()).map(|p| p.id));
    }
    Ok(ids)
}

/// Prints how `p` ended; false when it should have ended and did not.
fn report(p: &ProcessInfo, args: &Args, tree: usize) -> std::io::Result<bool> {
    let mut notes = Vec::new();
    if tree > 1 {
        notes.push(format!("{tree} processes in its tree"));
    }
    if p.signal == Some(Signal::Kill) && args.signal != Signal::Kill {
        notes.push(format!(
            "it outlived the grace period after {}",
            args.signal
        ));
    }
    let waited = stops(args.signal) && !args.no_wait;
    let line = match (p.state.is_finished(), waited) {
        (true, _) => describe::sentence_with(p, &notes),
        (false, true) => format!(
            "process {}{} is still running after {}",
            p.id,
            describe::label(p),
            args.signal
        ),
        (false, false) => format!(
            "sent {} to process {}{}",
            args.signal,
            p.id,
            describe::label(p)
        ),
    };
    if !args.json {
        outln!("{line}")?;
    }
    Ok(p.state.is_finished() || !waited)
}

fn explain(e: &ClientError, host: Option<&str>) -> String {
    match exit::client_hint(e, host) {
        Some(hint) => format!("{e}\nhint: {hint}"),
        None => e.to_string(),
    }
}
