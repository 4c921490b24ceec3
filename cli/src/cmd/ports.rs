//! `ports [PORT]`: every TCP port the daemon's running processes listen on or hold a lease on
//! (all owners: the person's view), one row each; with PORT, who holds it (`--kill` stops
//! it). A port someone else listens on is said to be no process of ours.

use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::{ListRequest, ProcessInfo};
use serde::Serialize;

use crate::ctx::Ctx;
use crate::exit;
use crate::platform::ports;
use crate::style::Paint;
use crate::table::{Cell, Column, Table};
use crate::target::Target;
use crate::usage;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this port: which process holds it (exit 1 when none of the daemon's does, saying
    /// who else listens there, if anyone).
    #[arg(value_name = "PORT")]
    port: Option<u16>,
    /// Stop the processes holding PORT, whole trees, as `cubactl kill ID` does.
    #[arg(long, requires = "port")]
    kill: bool,
    /// Print JSON: one object per row.
    #[arg(long)]
    json: bool,
}

/// One port of one process.
#[derive(Serialize, Debug)]
struct PortRow<'a> {
    port: u16,
    /// The listening address; `None` for a lease nothing listens on yet.
    address: Option<String>,
    id: u64,
    pid: u32,
    name: Option<&'a str>,
    owner: &'a str,
    state: &'static str,
    command: &'a str,
    /// The port is the one leased to the process (`start --port`).
    lease: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let instance = super::ps::instance(ctx, &client).await;
    let list: Vec<ProcessInfo> = client
        .list(ListRequest::default())
        .await?
        .into_iter()
        .filter(|p| !p.state.is_finished())
        .collect();
    // One sample, no CPU rate: only the trees' sockets are wanted.
    let usage = match ctx.is_remote() {
        true => HashMap::new(),
        false => usage::sample(&list, instance.as_deref()).usage(None),
    };
    let mut rows = Vec::new();
    for p in &list {
        let listening = usage.get(&p.id).map_or(&[][..], |u| &u.listening[..]);
        for a in listening {
            rows.push(row(p, a.port(), Some(a.to_string())));
        }
        if let Some(lease) = p.port.filter(|l| !listening.iter().any(|a| a.port() == *l)) {
            rows.push(row(p, lease, None));
        }
    }
    rows.retain(|r| args.port.is_none_or(|want| r.port == want));
    rows.sort_by(|a, b| (a.port, a.id, &a.address).cmp(&(b.port, b.id, &b.address)));
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
    } else if !rows.is_empty() {
        outln!("{}", render(ctx, &rows).trim_end())?;
    }
    let Some(port) = args.port else {
        if rows.is_empty() && !args.json {
            outln!("no process of the daemon's listens on a TCP port or holds a lease")?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    if rows.is_empty() {
        eprintln!("cubactl: {}", nobody_of_ours(ctx, port));
        return Ok(exit::failed());
    }
    if !args.kill {
        return Ok(ExitCode::SUCCESS);
    }
    let mut ids: Vec<u64> = rows.iter().map(|r| r.id).collect();
    ids.dedup();
    let targets = ids.into_iter().map(Target::Id).collect();
    super::kill::run(ctx, super::kill::Args::stop(targets, args.json)).await
}

fn row(p: &ProcessInfo, port: u16, address: Option<String>) -> PortRow<'_> {
    PortRow {
        port,
        address,
        id: p.id,
        pid: p.pid,
        name: p.name.as_deref(),
        owner: &p.owner.name,
        state: p.state.as_str(),
        command: &p.command,
        lease: p.port == Some(port),
    }
}

/// Why PORT has no row: nothing listens there, or something that is not ours does.
fn nobody_of_ours(ctx: &Ctx, port: u16) -> String {
    let holders = match ctx.is_remote() {
        true => Vec::new(),
        false => ports::holders(port),
    };
    let Some((addr, pid)) = holders.first() else {
        return format!("no process listens on port {port} (none of the daemon's holds it)");
    };
    let who = match pid {
        Some(pid) => format!("pid {pid}"),
        None => "a process whose files cannot be read (another user's)".to_string(),
    };
    format!("port {port} is held by {who} on {addr}, not a process of the daemon's")
}

fn render(ctx: &Ctx, rows: &[PortRow]) -> String {
    let mut t = Table::new(vec![
        Column::right("PORT"),
        Column::left("ADDRESS"),
        Column::right("ID"),
        Column::right("PID").optional(3),
        Column::left("NAME").optional(4),
        Column::left("OWNER"),
        Column::left("STATE").optional(2),
        Column::left("LEASE").optional(1),
        Column::left("COMMAND").flex(),
    ]);
    for r in rows {
        t.push(vec![
            Cell::painted(r.port.to_string(), Some(Paint::Bold)),
            Cell::new(r.address.as_deref().unwrap_or("not listening yet")),
            Cell::new(r.id.to_string()),
            Cell::new(r.pid.to_string()),
            Cell::painted(r.name.unwrap_or("-"), Some(Paint::Cyan)),
            Cell::new(r.owner),
            Cell::new(r.state),
            Cell::new(if r.lease { "yes" } else { "-" }),
            Cell::painted(r.command, Some(Paint::Dim)),
        ]);
    }
    t.render(ctx.out, ctx.width)
}
