//! The person's part of `ask` decisions: `approve ID`, `deny ID`, `approvals` (what waits, and
//! what is remembered; `approvals forget`), and `answer ID` (a password a program asks for,
//! typed here without echo, never seen by the model). The daemon refuses all of these from
//! inside any process tree it started: an agent cannot answer for the person.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use cuba_protocol::{
    Approvals, ApproveRequest, AskKind, DenyRequest, ForgetRequest, ProcessInfo, SecretAnswer,
};

use crate::ctx::Ctx;
use crate::style::Paint;
use crate::target::Target;

const APPROVE_HELP: &str = "\
A command the policy says to ask about (ask_commands, ask_side_effects, ask_dirs) waits in
state awaiting_approval, not started, or held at the exec of the program that matched, until a
person answers here, in the MCP client that asked (where it shows such questions), or nobody
does within approval_timeout (10 min: then it is denied). `cubactl approvals` lists what waits.

Examples:
  cubactl approve 7                 let process 7 run (this once)
  cubactl approve 7 --always        and do not ask about its rule again in its directory
  cubactl approve 7 --always --dir ~/src   ... anywhere below ~/src";

#[derive(clap::Args, Debug)]
#[command(after_help = APPROVE_HELP)]
pub struct ApproveArgs {
    /// The process awaiting approval: its id (first column of `cubactl ps`) or name.
    #[arg(value_name = "ID|NAME")]
    target: Target,
    /// Which of its questions, when it has more than one (`cubactl approvals` numbers them).
    #[arg(long, value_name = "N")]
    ask: Option<u64>,
    /// Remember the approval: its rule is not asked about again in the directory (and below).
    #[arg(long)]
    always: bool,
    /// With --always: where the approval holds [default: the command's directory].
    #[arg(long, value_name = "DIR", requires = "always")]
    dir: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct DenyArgs {
    /// The process awaiting approval (or a password): its id or name.
    #[arg(value_name = "ID|NAME")]
    target: Target,
    /// Which of its questions, when it has more than one (`cubactl approvals` numbers them).
    #[arg(long, value_name = "N")]
    ask: Option<u64>,
    /// Why: the model is told.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

const APPROVALS_HELP: &str = "\
Pending: every question waiting for a person, by process. Remembered: every approval given
with --always (or `approve always` in an MCP client), numbered as `forget` takes them; they
live in approvals.toml beside the settings file, which you may edit by hand.";

#[derive(clap::Args, Debug)]
#[command(after_help = APPROVALS_HELP)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    action: Option<Forget>,
    /// Print them as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum Forget {
    /// Forget remembered approvals: number N (as `cubactl approvals` shows), every one of a
    /// rule (`git push`), or --all.
    Forget {
        #[arg(value_name = "N|RULE", required_unless_present = "all")]
        which: Option<String>,
        #[arg(long, conflicts_with = "which")]
        all: bool,
    },
}

const ANSWER_HELP: &str = "\
A program in a command's tree that asks for a password (sudo -A, ssh, git over HTTPS: the
genuine ones only, named with their command line) asks you here instead of the agent: type it
at the prompt (nothing is shown), or pipe it on stdin. The model never sees it.";

#[derive(clap::Args, Debug)]
#[command(after_help = ANSWER_HELP)]
pub struct AnswerArgs {
    /// The process a program of which asks for a password: its id or name.
    #[arg(value_name = "ID|NAME")]
    target: Target,
    /// Which of its questions, when it has more than one (`cubactl approvals` numbers them).
    #[arg(long, value_name = "N")]
    ask: Option<u64>,
    /// Give no password: the program is told there is none.
    #[arg(long)]
    refuse: bool,
}

/// Where a record stands after an answer (`approved`: it was approved, else denied).
fn after(info: &ProcessInfo, approved: bool) -> String {
    let id = info.id;
    match (info.asks.len(), info.state.as_str(), approved) {
        (n, _, _) if n > 0 => format!("process {id} still has {n} question(s) waiting"),
        (_, "awaiting_approval", true) => format!("process {id} starts now"),
        (_, "awaiting_approval", false) => format!("process {id} will not run"),
        (_, "running", true) => format!("process {id} goes on"),
        (_, "running", false) => format!("process {id} goes on without that program"),
        (_, state, _) => format!("process {id} is {state}"),
    }
}

pub async fn approve(ctx: &Ctx, a: ApproveArgs) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = a.target.resolve(&client).await?;
    let dir = a
        .dir
        .map(|d| std::path::absolute(&d).unwrap_or(d))
        .map(|d| d.display().to_string());
    let info = client
        .approve(ApproveRequest {
            id,
            ask: a.ask,
            always: a.always,
            dir,
        })
        .await?;
    let remembered = if a.always { " (remembered)" } else { "" };
    eprintln!("cubactl: approved{remembered}; {}", after(&info, true));
    Ok(ExitCode::SUCCESS)
}

pub async fn deny(ctx: &Ctx, a: DenyArgs) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = a.target.resolve(&client).await?;
    let info = client
        .deny(DenyRequest {
            id,
            ask: a.ask,
            reason: a.reason,
        })
        .await?;
    eprintln!("cubactl: denied; {}", after(&info, false));
    Ok(ExitCode::SUCCESS)
}

pub async fn approvals(ctx: &Ctx, a: ApprovalsArgs) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let list = match a.action {
        None => client.approvals().await?,
        Some(Forget::Forget { which, all }) => {
            let req = match (which, all) {
                (_, true) => ForgetRequest::All,
                (Some(w), false) => match w.trim().parse::<u32>() {
                    Ok(n) => ForgetRequest::Index(n),
                    Err(_) => ForgetRequest::Rule(w),
                },
                (None, false) => bail!("give N, a rule, or --all"),
            };
            let before = client.approvals().await?.remembered.len();
            let after = client.forget(req).await?;
            eprintln!(
                "cubactl: forgot {} approval(s)",
                before.saturating_sub(after.remembered.len())
            );
            after
        }
    };
    if a.json {
        let json = crate::json::ApprovalsJson::of(&list);
        outln!("{}", serde_json::to_string(&json)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    print(ctx, &list)?;
    Ok(ExitCode::SUCCESS)
}

fn print(ctx: &Ctx, list: &Approvals) -> Result<()> {
    let now = cuba_protocol::now_ms();
    if list.pending.is_empty() {
        outln!("nothing waits for an answer")?;
    } else {
        outln!("{}", ctx.out.paint(Some(Paint::Bold), "waiting"))?;
        for p in &list.pending {
            let a = &p.ask;
            let left = a.deadline_ms.saturating_sub(now) / 1000;
            let verb = match a.kind {
                AskKind::Password => format!("{} asks for a password ({})", a.rule, a.what),
                AskKind::Command => format!("run `{}` ({})", a.what, a.rule),
                AskKind::Exec => format!("exec `{}` ({}, pid {})", a.what, a.rule, a.pid),
                AskKind::Network => format!("reach {} ({})", a.what, a.rule),
                AskKind::ClientGone => format!("stop it? {} ({})", a.what, a.rule),
            };
            let how = match a.kind {
                AskKind::Password => format!("cubactl answer {}", p.id),
                _ => format!("cubactl approve {} / deny {}", p.id, p.id),
            };
            outln!(
                "  process {} (ask {}) by {} in {}: {verb}; {how}; denied in {}s unless answered",
                p.id,
                a.id,
                p.owner,
                a.cwd,
                left
            )?;
        }
    }
    if !list.unconfirmed.is_empty() {
        let title = ctx.out.paint(Some(Paint::Bold), "edited, not in effect");
        outln!("{title} (`cubactl daemon reload` applies it)")?;
        for line in &list.unconfirmed {
            outln!("  {line}")?;
        }
    }
    if list.remembered.is_empty() {
        outln!("nothing is remembered ({})", list.file)?;
        return Ok(());
    }
    let title = ctx.out.paint(Some(Paint::Bold), "remembered");
    outln!("{title} ({})", list.file)?;
    for (i, r) in list.remembered.iter().enumerate() {
        let place = r.dir.as_deref().unwrap_or("anywhere");
        outln!(
            "  {}. {} in {place}: by {} through {}",
            i + 1,
            r.rule,
            r.by,
            r.channel
        )?;
    }
    Ok(())
}

/// Reads a password: from the terminal without echo, else a line of stdin.
fn read_secret(prompt: &str) -> Result<Vec<u8>> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin
            .lock()
            .read_line(&mut line)
            .context("cannot read stdin")?;
        return Ok(line.trim_end_matches(['\n', '\r']).as_bytes().to_vec());
    }
    let mut err = std::io::stderr();
    write!(err, "{prompt}")?;
    err.flush()?;
    let echo = crate::term::LineMode::enter(false).context("cannot turn terminal echo off")?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    drop(echo);
    writeln!(err)?;
    read.context("cannot read the terminal")?;
    Ok(line.trim_end_matches(['\n', '\r']).as_bytes().to_vec())
}

pub async fn answer(ctx: &Ctx, a: AnswerArgs) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    let id = a.target.resolve(&client).await?;
    let info = client.info(id).await?;
    let asked = info
        .asks
        .iter()
        .filter(|q| q.kind == AskKind::Password)
        .find(|q| a.ask.is_none_or(|n| n == q.id));
    let Some(asked) = asked else {
        bail!("process {id} has no program waiting for a password");
    };
    let secret = match a.refuse {
        true => None,
        false => {
            let prompt = format!("{} (for {} in process {id}): ", asked.what, asked.rule);
            Some(read_secret(&prompt)?)
        }
    };
    let given = secret.is_some();
    client
        .answer_secret(SecretAnswer {
            id,
            ask: Some(asked.id),
            secret,
        })
        .await?;
    match given {
        true => eprintln!("cubactl: given to {} in process {id}", asked.rule),
        false => eprintln!(
            "cubactl: {} in process {id} was told there is none",
            asked.rule
        ),
    }
    Ok(ExitCode::SUCCESS)
}
