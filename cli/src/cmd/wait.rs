//! `wait ID`: block until a process ends, its output matches a pattern, it goes quiet, or it
//! waits for input.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use cuba_protocol::{StreamFilter, WaitReason, WaitRequest, WaitSpec};
use serde_json::json;

use crate::ctx::Ctx;
use crate::describe;
use crate::exit;
use crate::target::Target;
use crate::units;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Exits 0 when the condition was met (the pattern matched; without --until: the process ended), \
1 on timeout, when the process ended without a match, or when it waits for input (blocked \
reading its stdin: answer with `cubactl send`). Never stops the process.")]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// Wait for a line of output matching this regex (its output so far counts too, unless
    /// --new). The matching line is printed.
    #[arg(long, short = 'u', value_name = "REGEX")]
    until: Option<String>,
    /// Wait for output to stop for this long (e.g. a build went quiet).
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration)]
    quiet: Option<Duration>,
    /// Give up after this long [default: no limit]. Examples: 30s, 10m.
    #[arg(long, short = 't', value_name = "DURATION", value_parser = units::parse_duration)]
    timeout: Option<Duration>,
    /// Match only output written from now on.
    #[arg(long)]
    new: bool,
    /// Print JSON: {"reason": …, "line": …, "process": {…}}.
    #[arg(long)]
    json: bool,
}

/// The daemon caps one wait at a day; longer waits are several requests.
const MAX_ONE_WAIT: Duration = Duration::from_secs(24 * 3600);

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    let since = if args.new {
        Some(client.info(id).await?.total_bytes())
    } else {
        None
    };
    let deadline = args.timeout.map(|t| Instant::now() + t);
    let result = loop {
        let left = deadline.map_or(MAX_ONE_WAIT, |d| {
            d.saturating_duration_since(Instant::now())
        });
        let r = client
            .wait(WaitRequest {
                id,
                since,
                spec: WaitSpec {
                    until: args.until.clone(),
                    quiet_ms: args.quiet.map(|q| q.as_millis() as u64),
                    timeout_ms: left.min(MAX_ONE_WAIT).as_millis() as u64,
                    max_bytes: 0,
                    stream: StreamFilter::Both,
                },
            })
            .await?;
        if r.reason != WaitReason::Timeout || deadline.is_some_and(|d| Instant::now() >= d) {
            break r;
        }
    };
    let (reason, line, met) = match &result.reason {
        WaitReason::Matched(line) => ("matched", Some(line.as_str()), true),
        WaitReason::Exited => ("exited", None, args.until.is_none()),
        WaitReason::Quiet => ("quiet", None, true),
        WaitReason::Timeout => ("timeout", None, false),
        WaitReason::WaitingInput => ("waiting_input", None, false),
        WaitReason::AwaitingApproval => ("awaiting_approval", None, false),
    };
    if args.json {
        let v = json!({ "reason": reason, "line": line, "process": crate::json::ProcessJson::of(&result.process) });
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        match &result.reason {
            WaitReason::Matched(line) => outln!("{line}")?,
            WaitReason::Exited if args.until.is_some() => eprintln!(
                "cubactl: {} without matching {:?}",
                describe::sentence(&result.process),
                args.until.as_deref().unwrap_or_default()
            ),
            WaitReason::Exited => eprintln!("{}", describe::sentence(&result.process)),
            WaitReason::Quiet => eprintln!("process {} went quiet", id),
            WaitReason::WaitingInput | WaitReason::AwaitingApproval
                if !result.process.asks.is_empty() =>
            {
                for ask in &result.process.asks {
                    eprintln!("{}", super::run_ask::question(&result.process, ask));
                }
            }
            WaitReason::WaitingInput => eprintln!(
                "cubactl: process {id} is waiting for input (cubactl send {id} TEXT answers it)"
            ),
            WaitReason::AwaitingApproval => eprintln!(
                "cubactl: process {id} awaits a person's approval (cubactl approve {id} or \
                 cubactl deny {id}; `cubactl approvals` says what it asks)"
            ),
            WaitReason::Timeout => eprintln!(
                "cubactl: timed out; process {} {}",
                id,
                describe::outcome(&result.process)
            ),
        }
    }
    Ok(if met {
        ExitCode::SUCCESS
    } else {
        exit::failed()
    })
}
