//! `hosts`: this machine and every configured host, each asked for its daemon's status at
//! once: how it is reached, whether it answers (or why not), version, OS, shell, running.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::hosts::{is_local, LOCAL};
use cuba_protocol::DaemonStatus;
use serde::Serialize;

use crate::ctx::Ctx;
use crate::fanout;
use crate::style::Paint;
use crate::table::{Cell, Column, Table};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Hosts come from [hosts.NAME] tables in config.toml (`ssh = \"me@build\"` or `command = [..]`) \
and from CUBA_EXEC_HOSTS (`build=ssh:me@build,dev=command:docker exec -i dev cubactl bridge`). \
Every host is asked at once, each for at most 20 s; a bridge starts the daemon there when none \
runs. Exits 0 when some host cannot be reached (its state says why), 1 when the configuration \
is broken.")]
pub struct Args {
    /// Print a JSON array, one object per host.
    #[arg(long)]
    json: bool,
}

/// Longest VIA shown in a table on a terminal (a `command` bridge can be long).
const VIA_WIDTH: usize = 40;

#[derive(Serialize)]
struct Row {
    name: String,
    via: String,
    /// The daemon answered.
    ok: bool,
    /// `ok`, or why it cannot be reached.
    state: String,
    #[serde(flatten)]
    status: Option<Status>,
}

#[derive(Serialize)]
struct Status {
    version: String,
    protocol: u32,
    os: String,
    arch: String,
    hostname: String,
    shell: String,
    running: u32,
    total: u32,
}

impl From<DaemonStatus> for Status {
    fn from(s: DaemonStatus) -> Status {
        Status {
            version: s.daemon_version,
            protocol: s.protocol_version,
            os: s.os,
            arch: s.arch,
            hostname: s.hostname,
            shell: s.shell,
            running: s.running,
            total: s.total,
        }
    }
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let names = fanout::names(ctx, false);
    let answers = fanout::each(ctx, &names, |c| async move { c.status().await }).await;
    let rows: Vec<Row> = names
        .into_iter()
        .zip(answers)
        .map(|(name, answer)| {
            let via = match is_local(Some(&name)) {
                true => "this machine".to_string(),
                false => ctx
                    .hosts()
                    .all()
                    .find(|h| h.name == name)
                    .map(|h| h.via())
                    .unwrap_or_default(),
            };
            let (state, status) = match answer {
                Ok(s) => ("ok".to_string(), Some(Status::from(s))),
                Err(e) => (e, None),
            };
            Row {
                name,
                via,
                ok: status.is_some(),
                state,
                status,
            }
        })
        .collect();
    let text = match args.json {
        true => serde_json::to_string_pretty(&rows)? + "\n",
        false => render(ctx, &rows),
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn render(ctx: &Ctx, rows: &[Row]) -> String {
    let mut t = Table::new(vec![
        Column::left("NAME"),
        Column::left("VIA").optional(2),
        Column::left("VERSION").optional(4),
        Column::left("OS/ARCH").optional(3),
        Column::left("SHELL").optional(1),
        Column::right("RUNNING").optional(5),
        Column::left("STATE").flex(),
    ]);
    let dash = || Cell::new("-");
    for r in rows {
        let name_paint = match r.name == LOCAL {
            true => Some(Paint::Bold),
            false => Some(Paint::Cyan),
        };
        let mut row = vec![
            Cell::painted(&r.name, name_paint),
            Cell::new(shorten(&r.via, ctx.width.map(|_| VIA_WIDTH))),
        ];
        match &r.status {
            Some(s) => row.extend([
                Cell::new(&s.version),
                Cell::new(format!("{}/{}", s.os, s.arch)),
                Cell::new(&s.shell),
                Cell::new(s.running.to_string()),
                Cell::painted(&r.state, Some(Paint::Green)),
            ]),
            None => row.extend([
                dash(),
                dash(),
                dash(),
                dash(),
                Cell::painted(&r.state, Some(Paint::Red)),
            ]),
        }
        t.push(row);
    }
    t.render(ctx.out, ctx.width)
}

/// `text` cut to `limit` characters with `…`.
fn shorten(text: &str, limit: Option<usize>) -> String {
    match limit {
        Some(n) if text.chars().count() > n => {
            let mut s: String = text.chars().take(n.saturating_sub(1)).collect();
            s.push('…');
            s
        }
        _ => text.to_string(),
    }
}
