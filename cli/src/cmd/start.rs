//! `start -- CMD`: start a command in the background and print its id at once.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use cuba_protocol::{PortWish, ProcState, WaitReason};

use crate::ctx::Ctx;
use crate::describe;
use crate::exit;
use crate::json::ProcessJson;
use crate::spawn_args::SpawnArgs;
use crate::style::Paint;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    spawn: SpawnArgs,
    /// Close the command's stdin at once (it sees EOF), instead of keeping it open for
    /// `cubactl send` and `cubactl attach`. Not with --session: the session's shell reads it.
    #[arg(long, conflicts_with = "session")]
    no_stdin: bool,
    /// Print the new record as JSON instead of the id.
    #[arg(long)]
    json: bool,
    /// With --name: if a process of that name and command is running, print its id instead
    /// of starting another (a dev server started once, however often this is run).
    #[arg(long, requires = "name")]
    ensure: bool,
    /// A TCP port for the command, in its environment as PORT and leased to it until it ends:
    /// `auto` for a free one no other process of the daemon's holds, or a number (refused,
    /// naming the holder, while another process listens on it or holds its lease). Printed
    /// on stderr after the id.
    #[arg(long, value_name = "auto|PORT", value_parser = parse_port, conflicts_with = "session")]
    port: Option<PortWish>,
}

fn parse_port(s: &str) -> Result<PortWish, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(PortWish::Auto);
    }
    match s.parse::<u16>() {
        Ok(n) if n > 0 => Ok(PortWish::Exact(n)),
        _ => Err("a port is `auto` or a number from 1 to 65535".into()),
    }
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let mut req = args.spawn.request(args.no_stdin);
    req.port = args.port;
    let ensure = args.ensure;
    let (client, (mut info, existing)) = ctx
        .once(|c| {
            let req = req.clone();
            async move {
                match ensure {
                    true => c.ensure(req).await,
                    false => c.spawn(req).await.map(|p| (p, false)),
                }
            }
        })
        .await?;
    // A command the shell cannot find or run ends within milliseconds: said now, with the
    // shell's words, rather than found later in `ps`.
    let mut said = None;
    let grace = cuba_protocol::start_grace_ms();
    if info.state != ProcState::FailedToStart && grace > 0 && !existing {
        if let Ok(w) = client.start_check(info.id, grace, 2048).await {
            // Ended within the grace other than well: it did not start in any useful sense.
            let failed = w.reason == WaitReason::Exited
                && (w.process.exit_code != Some(0) || w.process.signal.is_some());
            if failed {
                said = Some(
                    String::from_utf8_lossy(&w.output.bytes())
                        .trim()
                        .to_string(),
                );
            }
            info = w.process;
        }
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&ProcessJson::of(&info))?)?;
    }
    if info.state == ProcState::FailedToStart {
        eprintln!("cubactl: {}", describe::sentence(&info));
        return Ok(exit::failed());
    }
    if let Some(said) = said {
        let why = match info.exit_code {
            Some(127) => ": command not found",
            Some(126) => ": command not executable",
            _ => "",
        };
        eprintln!("cubactl: {}{why}", describe::sentence(&info));
        if !said.is_empty() {
            eprintln!("{said}");
        }
        return Ok(exit::failed());
    }
    if !args.json {
        outln!("{}", info.id)?;
        // The id alone on stdout, for `id=$(cubactl start …)`; the port beside it for a person.
        if let Some(port) = info.port {
            eprintln!("port {port} (PORT)");
        }
    }
    if let Some(note) = describe::notice(&info) {
        eprintln!("{}", ctx.err.paint(Some(Paint::Yellow), &note));
    }
    if let Some(ask) = info.asks.first() {
        let line = super::run_ask::question(&info, ask);
        eprintln!("{}", ctx.err.paint(Some(Paint::Yellow), &line));
        return Ok(ExitCode::SUCCESS);
    }
    if existing {
        let line = format!(
            "process {} of that name and command was running already: nothing was started",
            info.id
        );
        eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &line));
    } else if std::io::stderr().is_terminal() {
        let on = ctx.host.as_ref().map(|h| format!(" on host {h}"));
        let hint = format!(
            "started process {}{} (pid {}): `{cubactl} tail -f {0}` follows it, `{cubactl} kill \
             {0}` stops it",
            info.id,
            on.unwrap_or_default(),
            info.pid,
            cubactl = ctx.cubactl()
        );
        eprintln!("{}", ctx.err.paint(Some(Paint::Dim), &hint));
    }
    Ok(ExitCode::SUCCESS)
}
