//! `events`: the daemon's event log (started, exited, waiting for input, a watched pattern
//! matched, a port opened, a limit hit, a question asked and answered), one line per event for
//! a person or one JSON object per line; `--follow` keeps printing them as they happen, until
//! Ctrl-C or a closed stdout.

use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::client::Client;
use cuba_protocol::{Event, EventBatch, EventKind, EventsRequest, NotifyRequest};
use serde_json::json;

use crate::ctx::Ctx;
use crate::style::Paint;

/// Names remembered for the ids seen: a long follow looks each up once, and no more than this.
const MAX_NAMES: usize = 4096;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Keep printing events as they happen, until Ctrl-C.
    #[arg(short = 'f', long)]
    follow: bool,
    /// One JSON object per line: {"seq", "at_ms", "id", "name", "event", …its fields}.
    #[arg(long)]
    json: bool,
    /// From this sequence number on (a `next` printed before, or the `seq` of an event);
    /// default: every event the daemon keeps.
    #[arg(long, value_name = "N")]
    since: Option<u64>,
    /// Only the events of this process.
    #[arg(long, value_name = "ID")]
    id: Option<u64>,
    /// Watch the process's new output for this regex (repeatable, up to 4 per process): each
    /// matching line is a `matched` event, for every reader of the log. Needs --id.
    #[arg(long = "match", value_name = "REGEX", requires = "id")]
    patterns: Vec<String>,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    if let Some(id) = args.id {
        for pattern in &args.patterns {
            let watch = NotifyRequest {
                id,
                pattern: pattern.clone(),
            };
            client.notify(watch).await?;
        }
    }
    let req = EventsRequest {
        since: args.since,
        follow: args.follow,
        id: args.id,
        max: 0,
    };
    let mut names = Names::default();
    if !args.follow {
        // Every kept batch, bounded by the log's own size.
        let mut req = req;
        loop {
            let batch = client.events(req.clone()).await?;
            let again = !batch.events.is_empty();
            req.since = Some(batch.next);
            print(ctx, &client, &mut names, batch, args.json).await?;
            if !again {
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
    let mut feed = client.follow_events(req).await?;
    loop {
        tokio::select! {
            batch = feed.next() => match batch {
                Some(batch) => print(ctx, &client, &mut names, batch?, args.json).await?,
                None => return Ok(ExitCode::SUCCESS),
            },
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

async fn print(
    ctx: &Ctx,
    client: &Client,
    names: &mut Names,
    batch: EventBatch,
    json: bool,
) -> Result<()> {
    if batch.lost > 0 {
        let line = format!(
            "[{} earlier events are no longer kept (CUBA_EXEC_EVENTS_KEEP)]",
            batch.lost
        );
        eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &line));
    }
    for event in &batch.events {
        let name = names.of(client, event).await;
        match json {
            true => outln!("{}", to_json(event, name.as_deref()))?,
            false => outln!("{}", line(event, name.as_deref()))?,
        }
    }
    Ok(())
}

/// Names of processes by id: from their `Started` events, else asked once.
#[derive(Default)]
struct Names(HashMap<u64, Option<String>>);

impl Names {
    async fn of(&mut self, client: &Client, event: &Event) -> Option<String> {
        let id = event.id?;
        if let EventKind::Started { name, .. } = &event.kind {
            self.remember(id, name.clone());
        }
        if let Some(name) = self.0.get(&id) {
            return name.clone();
        }
        // A pruned record has no name any more: remembered as none.
        let name = client.info(id).await.ok().and_then(|p| p.name);
        self.remember(id, name.clone());
        name
    }

    fn remember(&mut self, id: u64, name: Option<String>) {
        if self.0.len() >= MAX_NAMES {
            self.0.clear();
        }
        self.0.insert(id, name);
    }
}

/// `MM-DD HH:MM:SS  #ID (name)  what happened`.
fn line(e: &Event, name: Option<&str>) -> String {
    let who = match (e.id, name) {
        (Some(id), Some(name)) => format!("{id} ({name})"),
        (Some(id), None) => id.to_string(),
        (None, _) => "-".to_string(),
    };
    let what = match &e.kind {
        EventKind::Started { command, .. } => format!("started: {command}"),
        EventKind::Exited {
            state,
            exit_code,
            signal,
        } => match (exit_code, signal) {
            (Some(code), _) => format!("{} (exit {code})", state.as_str()),
            (None, Some(sig)) => format!("{} (SIG{sig})", state.as_str()),
            (None, None) => state.as_str().to_string(),
        },
        EventKind::WaitingInput { prompt } => format!("waiting for input: {prompt}"),
        EventKind::Matched { pattern, line } => format!("matched /{pattern}/: {line}"),
        EventKind::PortOpened { port } => format!("listening on port {port}"),
        EventKind::LimitHit { limit, detail } => format!("limit {limit}: {detail}"),
        EventKind::AskRaised { ask, kind, what } => {
            format!("asks ({} question {ask}): {what}", kind.as_str())
        }
        EventKind::AskAnswered { ask, approved, by } => {
            let answer = if *approved { "approved" } else { "denied" };
            format!("question {ask} {answer} by {by}")
        }
    };
    let at = crate::cmd::audit::local_time(e.at_ms);
    format!("{:>6}  {at}  {who:<16} {what}", e.seq)
}

/// The JSON line of an event: its place, its process and its kind's fields.
fn to_json(e: &Event, name: Option<&str>) -> serde_json::Value {
    let mut v = json!({
        "seq": e.seq,
        "at_ms": e.at_ms,
        "id": e.id,
        "name": name,
        "event": e.kind.as_str(),
    });
    let fields = match &e.kind {
        EventKind::Started { command, name: _ } => json!({ "command": command }),
        EventKind::Exited {
            state,
            exit_code,
            signal,
        } => json!({
            "state": state.as_str(),
            "exit_code": exit_code,
            "signal": signal.map(|s| s.to_string()),
        }),
        EventKind::WaitingInput { prompt } => json!({ "prompt": prompt }),
        EventKind::Matched { pattern, line } => json!({ "pattern": pattern, "line": line }),
        EventKind::PortOpened { port } => json!({ "port": port }),
        EventKind::LimitHit { limit, detail } => json!({ "limit": limit, "detail": detail }),
        EventKind::AskRaised { ask, kind, what } => {
            json!({ "ask": ask, "kind": kind.as_str(), "what": what })
        }
        EventKind::AskAnswered { ask, approved, by } => {
            json!({ "ask": ask, "approved": approved, "by": by })
        }
    };
    if let (Some(obj), serde_json::Value::Object(more)) = (v.as_object_mut(), fields) {
        obj.extend(more);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuba_protocol::ProcState;

    #[test]
    fn an_event_reads_as_one_line_and_one_json_object() {
        let e = Event {
            seq: 7,
            at_ms: 1_700_000_000_000,
            id: Some(3),
            kind: EventKind::Exited {
                state: ProcState::Exited,
                exit_code: Some(2),
                signal: None,
            },
        };
        let text = line(&e, Some("web"));
        assert!(
            text.contains("3 (web)") && text.ends_with("exited (exit 2)"),
            "{text}"
        );
        let v = to_json(&e, Some("web"));
        assert_eq!(v["event"], "exited");
        assert_eq!(v["state"], "exited");
        assert_eq!(v["exit_code"], 2);
        assert_eq!(v["name"], "web");
        assert_eq!(v["seq"], 7);
    }
}
