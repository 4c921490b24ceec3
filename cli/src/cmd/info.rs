//! `info ID`: one process's record, with its tree's pids, CPU, memory and ports.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use crate::ctx::Ctx;
use crate::describe;
use crate::json::ProcessJson;
use crate::style::{self, Paint};
use crate::table::sanitize;
use crate::target::Target;
use crate::units;
use crate::usage;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    let p = client.info(id).await?;
    // Another host's pids are not in this machine's process table: no tree, CPU, memory or ports.
    let measured = match ctx.is_remote() {
        true => Default::default(),
        false => {
            let instance = super::ps::instance(ctx, &client).await;
            usage::measure(std::slice::from_ref(&p), instance.as_deref()).await
        }
    };
    let u = measured.get(&p.id);
    if args.json {
        let row = ProcessJson::of(&p).on(ctx.host.as_deref()).with(u);
        let text = serde_json::to_string_pretty(&row)? + "\n";
        std::io::stdout().lock().write_all(text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = cuba_protocol::now_ms();
    let dash = || "-".to_string();
    let mut lines: Vec<(&str, String, Option<Paint>)> = vec![
        ("id", p.id.to_string(), Some(Paint::Bold)),
        ("name", p.name.clone().unwrap_or_else(dash), None),
        ("command", p.command.clone(), None),
        ("cwd", p.cwd.clone(), None),
        (
            "owner",
            format!(
                "{} ({}, pid {})",
                p.owner.name,
                crate::json::owner_kind(p.owner.kind),
                p.owner.pid
            ),
            None,
        ),
        ("kind", p.kind.as_str().to_string(), None),
        ("state", p.state.as_str().to_string(), style::of_state(&p)),
        (
            "pid",
            if p.pid > 0 { p.pid.to_string() } else { dash() },
            None,
        ),
        (
            "started",
            format!("{} ago", units::age(now.saturating_sub(p.started_at_ms))),
            None,
        ),
        ("runtime", units::age(p.elapsed_ms(now)), None),
    ];
    if let Some(host) = &ctx.host {
        lines.insert(1, ("host", host.clone(), Some(Paint::Cyan)));
    }
    if let Some(session) = &p.session {
        lines.push(("session", session.clone(), Some(Paint::Cyan)));
    }
    let terminal = p.tty.map_or_else(
        || "none (stdin, stdout and stderr are pipes)".to_string(),
        |s| {
            format!(
                "{}x{} (a pseudo-terminal: `cubactl screen {}`)",
                s.cols, s.rows, p.id
            )
        },
    );
    lines.push(("terminal", terminal, None));
    if p.state.is_finished() {
        lines.push(("ended", describe::outcome(&p), None));
    }
    if let Some(t) = p.timeout_ms {
        lines.push(("timeout", units::age(t), None));
    }
    lines.push((
        "output",
        format!(
            "{} stdout, {} stderr{}",
            units::bytes(p.stdout_bytes),
            units::bytes(p.stderr_bytes),
            if p.dropped_bytes > 0 {
                format!(", {} dropped", units::bytes(p.dropped_bytes))
            } else {
                String::new()
            }
        ),
        None,
    ));
    // Where a long output's errors are (the cursor is the output's byte offset).
    if let Some(e) = &p.errors {
        let mark = |m: &cuba_protocol::ErrorMark| {
            let at = m
                .location
                .as_deref()
                .map_or(String::new(), |l| format!("{l} "));
            format!("{at}@{}: {}", m.cursor, m.line)
        };
        lines.push(("errors", format!("{} lines", e.count), Some(Paint::Red)));
        lines.push(("first error", mark(&e.first), None));
        if e.last.cursor != e.first.cursor {
            lines.push(("last error", mark(&e.last), None));
        }
    }
    // The daemon's own figures, from the process's cgroup (kept once it ended).
    if p.cpu_ms.is_some() || p.memory_bytes.is_some() {
        let mut text = format!("cpu time {}", p.cpu_ms.map_or_else(dash, units::age));
        if let Some(m) = p.memory_bytes {
            text.push_str(&format!(", memory {}", units::bytes(m)));
        }
        if let Some(m) = p.memory_peak_bytes {
            text.push_str(&format!(" (peak {})", units::bytes(m)));
        }
        lines.push(("cgroup", text, None));
    }
    if let Some(u) = u {
        let pids: Vec<String> = u.pids.iter().map(i32::to_string).collect();
        lines.push(("tree", pids.join(" "), None));
        let cpu = u.cpu_percent.map_or_else(dash, |c| format!("{c:.1}%"));
        lines.push(("cpu", cpu, None));
        lines.push(("memory", units::bytes(u.rss_bytes), None));
        let ports: Vec<String> = u.listening.iter().map(|a| a.to_string()).collect();
        lines.push((
            "listening",
            if ports.is_empty() {
                dash()
            } else {
                ports.join(" ")
            },
            None,
        ));
    }
    if let Some(e) = &p.error {
        lines.push(("error", e.clone(), Some(Paint::Red)));
    }
    if let Some(n) = &p.notice {
        lines.push(("notice", n.clone(), Some(Paint::Yellow)));
    }
    if let Some(n) = &p.spool {
        lines.push(("spool", n.clone(), Some(Paint::Yellow)));
    }
    if let Some(agent) = &p.budget {
        lines.push((
            "budget",
            format!("agent {agent}'s (`cubactl ps` shows its use)"),
            None,
        ));
    }
    if let Some(hit) = &p.budget_hit {
        lines.push(("budget", hit.clone(), Some(Paint::Yellow)));
    }
    match (p.refused_forks(), p.pids_max) {
        (Some(refused), _) => lines.push(("pids", refused, Some(Paint::Yellow))),
        (None, Some(max)) => lines.push(("pids", format!("pids_max {max}"), None)),
        (None, None) => {}
    }
    for line in p.blocked_lines() {
        lines.push(("blocked", line, Some(Paint::Red)));
    }
    let mut out = String::new();
    for (key, value, paint) in lines {
        let key = ctx.out.paint(Some(Paint::Dim), &format!("{key:<10}"));
        out.push_str(&format!(
            "{key} {}\n",
            ctx.out.paint(paint, &sanitize(&value))
        ));
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
