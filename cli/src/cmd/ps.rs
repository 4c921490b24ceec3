//! `ps`: the shared table, with CPU, memory and ports as the system reports them; `-w` keeps
//! it live. On another host (`--host`) the columns this machine's system measures are `-`;
//! `--all-hosts` is `ps_all` (main sends it there).

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use cuba_protocol::client::Client;
use cuba_protocol::{ListRequest, ProcessInfo, Request, Response};

use crate::ctx::Ctx;
use crate::proctable;
use crate::signals::{self, Kind};
use crate::style::Paint;
use crate::usage::{self, Sample};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only processes still running (or waiting for input).
    #[arg(long, short = 'r')]
    running: bool,
    /// Only processes started by this owner (an agent's name, or `cubactl`). No `-o`: in ps
    /// that picks the columns, and a filter taken for it would hide every row.
    #[arg(long, value_name = "NAME")]
    owner: Option<String>,
    /// Keep watching: redraw on every change (and every 2 s for CPU and age); Ctrl-C quits.
    #[arg(long, short = 'w')]
    watch: bool,
    /// One table across this machine and every configured host, with a HOST column; a host
    /// that cannot be reached is one line on stderr. Not with -w (watch one host with
    /// `--host NAME ps -w`).
    #[arg(long, conflicts_with = "watch")]
    pub all_hosts: bool,
    /// Print JSON (with -w: one array per line, per change; rows of another host have a
    /// "host" field).
    #[arg(long)]
    pub json: bool,
}

const REFRESH: Duration = Duration::from_secs(2);

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let instance = instance(ctx, &client).await;
    let req = request(&args);
    if args.watch {
        return watch(ctx, &client, &args, req, instance.as_deref()).await;
    }
    let listing = client.listing(req).await?;
    let budgets = listing.budgets;
    let list = filter(listing.processes, &args);
    let usage = match ctx.is_remote() {
        true => HashMap::new(),
        false => usage::measure(&list, instance.as_deref()).await,
    };
    let host = ctx.host.as_deref();
    let text = if args.json {
        serde_json::to_string_pretty(&proctable::json_rows(host, &list, &usage))? + "\n"
    } else if list.is_empty() {
        format!(
            "no processes (`{} start -- COMMAND` starts one)\n",
            ctx.cubactl()
        )
    } else {
        proctable::render(ctx, &list, &usage, &budgets)
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The daemon's instance token, to find its processes' trees in this machine's process table; none
/// for another host (its pids are not this machine's).
pub async fn instance(ctx: &Ctx, client: &Client) -> Option<String> {
    if ctx.is_remote() {
        return None;
    }
    let status = client.status().await.ok()?;
    usage::instance(&status.state_dir)
}

pub fn request(args: &Args) -> ListRequest {
    ListRequest {
        owner: args.owner.clone(),
        ..ListRequest::default()
    }
}

pub fn filter(list: Vec<ProcessInfo>, args: &Args) -> Vec<ProcessInfo> {
    list.into_iter()
        .filter(|p| !args.running || !p.state.is_finished())
        .collect()
}

async fn watch(
    ctx: &Ctx,
    client: &Client,
    args: &Args,
    req: ListRequest,
    instance: Option<&str>,
) -> Result<ExitCode> {
    let mut interrupt = signals::listen(Kind::Interrupt)?;
    let mut frames = client.subscribe(Request::WatchTable(req)).await?;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut tick = tokio::time::interval(REFRESH);
    let mut list: Vec<ProcessInfo> = Vec::new();
    let mut budgets = Vec::new();
    let mut before: Option<Sample> = None;
    loop {
        tokio::select! {
            frame = frames.next() => match frame {
                Some(Ok(Response::List(l))) => {
                    budgets = l.budgets;
                    list = filter(l.processes, args);
                }
                Some(Ok(other)) => anyhow::bail!("unexpected frame from cubad: {other:?}"),
                Some(Err(e)) => return Err(e.into()),
                None => return Ok(ExitCode::SUCCESS),
            },
            _ = tick.tick(), if tty => {}
            _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
        }
        let usage = match ctx.is_remote() {
            // Another host's pids: nothing of them is in this machine's process table.
            true => HashMap::new(),
            false => {
                // CPU % needs a window of some length: clock ticks are coarse.
                let since = before
                    .get_or_insert_with(|| usage::sample(&list, instance))
                    .age();
                if since < usage::SAMPLE {
                    tokio::time::sleep(usage::SAMPLE - since).await;
                }
                let now = usage::sample(&list, instance);
                let usage = now.usage(before.as_ref());
                before = Some(now);
                usage
            }
        };
        let host = ctx.host.as_deref();
        let mut text = if args.json {
            serde_json::to_string(&proctable::json_rows(host, &list, &usage))? + "\n"
        } else {
            proctable::render(ctx, &list, &usage, &budgets)
        };
        if tty && !args.json {
            // Home, then clear: the table is redrawn in place.
            let title = ctx.out.paint(
                Some(Paint::Dim),
                &format!("{} process(es) · every change · Ctrl-C quits", list.len()),
            );
            text = format!("\x1b[H\x1b[2J{title}\n{text}");
        } else if !args.json {
            text.push('\n');
        }
        std::io::stdout().lock().write_all(text.as_bytes())?;
    }
}
