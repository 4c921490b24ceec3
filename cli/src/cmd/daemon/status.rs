//! `daemon status`: what the running daemon says about itself. Never starts one on this
//! machine; another host's (`--host`) is reached through its bridge, which starts one there
//! when none runs.

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
    let existing = match ctx.is_remote() {
        true => Ok(ctx.connect().await?),
        false => ctx.connect_existing().await,
    };
    let client = match existing {
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
        if let Some(host) = &ctx.host {
            v["host"] = json!(host);
        }
        v["running"] = json!(true);
        v["uptime_ms"] = json!(uptime);
        if !ctx.is_remote() {
            let state = cuba_protocol::paths::state_dir();
            v["http"] = crate::cmd::http::running(&state).unwrap_or(json!(null));
        }
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let log = cuba_protocol::paths::daemon_log(std::path::Path::new(&s.state_dir));
    let mut rows = vec![
        ("cubad", ctx.out.paint(Some(Paint::Green), "running")),
        (
            "machine",
            format!("{} ({}/{}), shell {}", s.hostname, s.os, s.arch, s.shell),
        ),
        (
            "version",
            format!("{} (protocol {})", s.daemon_version, s.protocol_version),
        ),
        ("pid", s.pid.to_string()),
        ("uptime", units::age(uptime)),
        (
            "upgraded",
            match s.upgraded_at_ms {
                Some(at) => format!(
                    "{} ago, in place ({} time(s) since the start)",
                    units::age(cuba_protocol::now_ms().saturating_sub(at)),
                    s.upgrades
                ),
                None => "never (since the start)".to_string(),
            },
        ),
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
        ("supervise", s.supervision.clone()),
        ("exec checks", s.exec_checks.clone()),
    ];
    for line in &s.sandbox {
        rows.push(("sandbox", line.clone()));
    }
    // Where `cubactl http` finds the endpoint: this environment's state directory.
    if !ctx.is_remote() {
        let state = cuba_protocol::paths::state_dir();
        let http = match crate::cmd::http::running(&state) {
            Some(doc) => crate::cmd::http::describe(&doc),
            None => "not serving (`cubactl http start`)".to_string(),
        };
        rows.push(("http", http));
    }
    if let Some(host) = &ctx.host {
        let via = ctx.hosts().get(host).map(|h| h.via()).unwrap_or_default();
        rows.insert(1, ("host", format!("{host} (via {via})")));
    }
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
