//! `policy check 'CMD'`: what the daemon's command policy says about shell text, and which
//! simple commands it found in it. Nothing is run.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use cuba_protocol::{PolicyDecision, Request, Response};

use crate::ctx::Ctx;

const CHECK_HELP: &str = "\
The daemon parses the text as bash and finds every simple command in it: after ; && || | &,
inside $( ), backticks, <( ), subshells, { } groups, if/while/for/case and function bodies,
through wrappers (env, sudo, doas, nice, nohup, timeout, time, xargs, command, exec, builtin,
busybox, find -exec) and inside sh -c / bash -c strings. Paths and quoting are normalised
(/bin/rm, \\rm and r''m are all rm). Each command is held against the blocklist
(CUBA_EXEC_BLOCKED_COMMANDS, default rm dd mkfs ... visudo) and, when set, the allowlist
(CUBA_EXEC_ALLOWED_COMMANDS). Commands whose name is only known at run time ($cmd, eval,
source) are shown as ?(...) and refused only when an allowlist is set.

Examples:
  cubactl policy check 'ls -la'                  allowed, exit 0
  cubactl policy check 'echo ok && sudo rm -rf /' refused by the blocklist, exit 1
  cubactl policy check --json 'sh -c \"make\"'     the decision as one JSON object

Exit status: 0 allowed, 1 refused (or the daemon could not be asked).
This is a seatbelt: an allowed program (python -c, a compiled binary) can still do anything.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Ask the daemon whether it would run COMMAND, and print the rule and the sub-commands
    /// it saw.
    #[command(after_help = CHECK_HELP)]
    Check(CheckArgs),
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// Print the decision as JSON: allowed, rule, offending, commands, message.
    #[arg(long)]
    json: bool,
    /// The shell text, as one argument (quote it).
    #[arg(value_name = "COMMAND")]
    command: String,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    match args.action {
        Action::Check(a) => check(ctx, a).await,
    }
}

async fn check(ctx: &Ctx, args: CheckArgs) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let d = match client.call(Request::PolicyCheck(args.command)).await? {
        Response::Policy(d) => d,
        other => anyhow::bail!("unexpected reply from cubad: {other:?}"),
    };
    // Where it runs, the sandbox holds it to the same bounds whatever the text says.
    let sandbox = match client.call(Request::DaemonStatus).await {
        Ok(Response::DaemonStatus(s)) => s.sandbox,
        _ => Vec::new(),
    };
    if args.json {
        let mut json = to_json(&d);
        json["sandbox"] = serde_json::json!(sandbox);
        outln!("{json}")?;
    } else {
        print_human(&d)?;
        if !sandbox.is_empty() {
            outln!("in the sandbox:")?;
            for line in &sandbox {
                outln!("  {line}")?;
            }
        }
    }
    Ok(if d.allowed {
        ExitCode::SUCCESS
    } else {
        crate::exit::failed()
    })
}

fn to_json(d: &PolicyDecision) -> serde_json::Value {
    serde_json::json!({
        "allowed": d.allowed,
        "rule": d.rule,
        "offending": d.offending,
        "commands": d.commands,
        "nested": d.nested,
        "message": d.message,
        "ask": d.ask,
    })
}

fn print_human(d: &PolicyDecision) -> std::io::Result<()> {
    match (&d.rule, &d.offending) {
        (Some(rule), Some(offending)) => {
            outln!("refused by the {rule} rule: {offending}")?;
        }
        _ if d.allowed => match &d.ask {
            Some(rule) => outln!("ask: allowed once a person approves ({rule})")?,
            None => outln!("allowed")?,
        },
        _ => outln!("refused")?,
    }
    outln!("{}", d.message)?;
    if !d.nested.is_empty() {
        outln!("shell texts followed:")?;
        for t in &d.nested {
            // One line each: a here-document's newlines shown as `\n`.
            outln!("  {}", t.trim_end().replace('\n', "\\n"))?;
        }
    }
    if !d.commands.is_empty() {
        outln!("commands seen (?(…): not known before run time):")?;
        for c in &d.commands {
            outln!("  {c}")?;
        }
    }
    Ok(())
}
