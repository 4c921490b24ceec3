//! `ps --all-hosts`: one table across this machine and every configured host (those policy
//! allows), asked at once; a host that cannot be reached is one line on stderr and the others
//! still show.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::hosts::is_local;
use cuba_protocol::ProcessInfo;

use super::ps::{filter, instance, request, Args};
use crate::ctx::Ctx;
use crate::exit;
use crate::fanout;
use crate::proctable::{self, Entry};
use crate::usage;

pub async fn run(ctx: &Ctx, args: &Args) -> Result<ExitCode> {
    if let Some(host) = &ctx.host {
        eprintln!("cubactl ps: --all-hosts lists every host; drop --host {host}");
        return Ok(ExitCode::from(2));
    }
    let names = fanout::names(ctx, true);
    let req = request(args);
    let answers = fanout::each(ctx, &names, |c| {
        let req = req.clone();
        async move { c.list(req).await }
    })
    .await;
    let mut lists: Vec<(&str, Vec<ProcessInfo>)> = Vec::new();
    for (name, answer) in names.iter().zip(answers) {
        match answer {
            Ok(list) => lists.push((name, filter(list, args))),
            Err(e) => eprintln!("host {name}: {e}"),
        }
    }
    if lists.is_empty() {
        // Not one host answered, this machine included: there is no table at all.
        return Ok(exit::failed());
    }
    // CPU, memory and ports only for this machine's processes: its table is the only one here.
    let mut local_usage = HashMap::new();
    if let Some((_, list)) = lists.iter().find(|(h, _)| is_local(Some(h))) {
        if let Ok(client) = ctx.connect_to(None).await {
            let instance = instance(ctx, &client).await;
            local_usage = usage::measure(list, instance.as_deref()).await;
        }
    }
    let none = HashMap::new();
    let usage_of = |host: &str| match is_local(Some(host)) {
        true => &local_usage,
        false => &none,
    };
    let text = if args.json {
        let rows: Vec<_> = lists
            .iter()
            .flat_map(|(host, list)| proctable::json_rows(Some(host), list, usage_of(host)))
            .collect();
        serde_json::to_string_pretty(&rows)? + "\n"
    } else {
        let entries: Vec<Entry> = lists
            .iter()
            .flat_map(|(host, list)| {
                let usage = usage_of(host);
                list.iter().map(move |p| (Some(*host), p, usage.get(&p.id)))
            })
            .collect();
        match entries.is_empty() {
            true => "no processes on any host\n".to_string(),
            false => proctable::render_entries(ctx, &entries, true),
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
