//! `daemon status`: what the running daemon says about itself. Never starts one.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use super::absent;
use crate::ctx::Ctx;
use crate::exit;
use crate::style::Paint;
use crate::units;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON ({"running": false, …} when it is not running).
    #[arg(long)]
    json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = match ctx.connect_existing().await {
        Ok(c) => c,
        Err(e) if absent(&e) => {
            if args.json {
                let v = json!({ "running": false, "socket": ctx.socket.display().to_string() });
                outln!("{v}")?;
            } else {
                outln!("cubad is not running (socket {})", ctx.socket.display())?;
                eprintln!(
                    "hint: `cubactl daemon start` starts it; other commands start it when needed"
                );
            }
            return Ok(exit::failed());
        }
        Err(e) => return Err(e.into()),
    };
    let s = client.status().await?;
    let uptime = cuba_protocol::now_ms().saturating_sub(s.started_at_ms);
    if args.json {
        let mut v = serde_json::to_value(&s)?;
        v["running"] = json!(true);
        v["uptime_ms"] = json!(uptime);
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let log = cuba_protocol::paths::daemon_log(std::path::Path::new(&s.state_dir));
    let rows = [
        ("cubad", ctx.out.paint(Some(Paint::Green), "running")),
        (
            "version",
            format!("{} (protocol {})", s.daemon_version, s.protocol_version),
        ),
        ("pid", s.pid.to_string()),
        ("uptime", units::age(uptime)),
        ("socket", s.socket.clone()),
        ("state dir", s.state_dir.clone()),
        ("log", log.display().to_string()),
        (
            "clients",
            format!("{} connected (this one included)", s.clients),
        ),
        (
            "processes",
            format!(
                "{} running (at most {}), {} in the table",
                s.running, s.max_procs, s.total
            ),
        ),
    ];
    let mut out = String::new();
    for (k, v) in rows {
        out.push_str(&format!(
            "{} {v}\n",
            ctx.out.paint(Some(Paint::Dim), &format!("{k:<10}"))
        ));
    }
    for n in &s.notices {
        out.push_str(&format!(
            "{} {}\n",
            ctx.out
                .paint(Some(Paint::Dim), &format!("{:<10}", "notice")),
            ctx.out.paint(Some(Paint::Yellow), n)
        ));
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
