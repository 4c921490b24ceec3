//! `cubactl`: the human side of the shared process table.

/// `println!` that returns the write's result instead of panicking (a closed pipe is not a
/// crash: `cubactl ps --json | head -1`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod cmd;
mod ctx;
mod daemon_proc;
mod describe;
mod exit;
mod fanout;
mod forward;
mod json;
mod passthrough;
mod platform;
mod print;
mod proctable;
mod signals;
mod spawn_args;
mod style;
mod table;
mod target;
mod term;
mod units;
mod usage;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::ctx::Ctx;
use crate::style::ColorChoice;

const EXAMPLES: &str = "\
Examples:
  cubactl start --name web -- python3 -m http.server 8000   start in the background, print its id
  cubactl ps                        every process: agents' and people's alike
  cubactl tail -f 3                 follow process 3 until it ends
  cubactl attach 3                  answer its prompt (Ctrl-] detaches, it keeps running)
  cubactl start --tty -- python3    on a terminal of its own; `screen 4` shows it,
                                    `send 4 'x=1' --key Enter` types, `attach 4` takes it over
  cubactl run --session dev -- 'cd src && make'   in the persistent shell `dev`
  cubactl run -- make test          run in the foreground; exits with make's code
  cubactl kill 3                    TERM to its whole tree, KILL after the grace period
  cubactl kill --owner claude-code  stop everything one agent started
  cubactl start --port auto -- 'python3 -m http.server $PORT'   a free port, leased, in $PORT
  cubactl ports 3000                which process holds port 3000 (--kill stops it)
  cubactl --host build ps           the processes of host `build`, through its bridge (ssh)
  cubactl hosts                     every configured host: reachable, version, OS, shell
  cubactl ps --all-hosts            one table across this machine and every host
  cubactl events -f                 what happens, as it happens (exits, prompts, ports …)
  cubactl approvals                 what waits for your answer (ask_commands …)
  cubactl approve 5 --always        let process 5 run, and its rule here from now on
  cubactl deny 5 --reason 'not on Friday'   refuse it; the agent is told why
  cubactl answer 6                  type the password sudo -A asks for in process 6
  cubactl token create phone        a bearer token for the HTTP endpoint (`http start`)

Processes are named by the small integer id `ps` shows in its first column. The daemon
(cubad) starts on first use; `cubactl daemon status` shows it. Each machine runs its own
daemon; `--host NAME` aims any command at another one's, configured as [hosts.NAME] in
config.toml or in CUBA_EXEC_HOSTS (`build=ssh:me@build`). Ids are per host.

Exit status: 0 ok, 1 the operation failed, 2 bad usage; `run` exits with its command's code
(128 + N when killed by signal N).";

/// Watch and steer the processes that AI agents and people run through cuba-exec.
///
/// Every command an agent runs through cuba-exec, and every command started here, is in one
/// table kept by the cubad daemon: list it, follow output, answer prompts, stop trees.
#[derive(Parser, Debug)]
#[command(name = "cubactl", version, after_help = EXAMPLES)]
struct Cli {
    /// The daemon's socket [default: $CUBA_EXEC_SOCKET, else $XDG_RUNTIME_DIR/cuba-exec/cubad.sock,
    /// else /tmp/cuba-exec-$UID/cubad.sock ($TMPDIR on macOS)].
    // The variables are read here, not by clap: clap would show an option set from the
    // environment in every usage line, as if it had to be typed.
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        help_heading = "Global options"
    )]
    socket: Option<PathBuf>,
    /// Aim the command at host NAME's daemon (`[hosts.NAME]` in config.toml, or
    /// CUBA_EXEC_HOSTS), reached through its bridge; `local` is this machine [default:
    /// $CUBA_EXEC_HOST].
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        help_heading = "Global options"
    )]
    host: Option<String>,
    /// When to colour output: auto means on a terminal and NO_COLOR unset.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = ColorChoice::Auto,
        value_name = "WHEN",
        help_heading = "Global options"
    )]
    color: ColorChoice,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List processes: id, name, owner, state, exit, age, CPU, memory, ports, command (of
    /// one host; --all-hosts: of every host).
    #[command(visible_alias = "ls")]
    Ps(cmd::ps::Args),
    /// TCP ports the daemon's processes listen on or hold a lease on (every owner's): port,
    /// address, process, owner; `ports 3000` says who holds port 3000, `--kill` stops it.
    Ports(cmd::ports::Args),
    /// Everything known about one process.
    Info(cmd::info::Args),
    /// Print the last lines of a process's output; -f follows it until it ends.
    Tail(cmd::tail::Args),
    /// Print a process's whole output (for a pager or a file).
    Logs(cmd::logs::Args),
    /// Run a command through the daemon in the foreground: output streams here, Ctrl-C
    /// reaches it, and cubactl exits with its exit code.
    Run(cmd::run::Args),
    /// Start a command in the background and print its id; a command that fails within 100 ms
    /// (not found, not executable, any failing exit; CUBA_EXEC_START_GRACE_MS), or 500 ms more
    /// when it printed something by then (CUBA_EXEC_START_SETTLE_MS), is an error at once, with
    /// its output.
    Start(cmd::start::Args),
    /// Stop processes and their whole trees, gracefully: TERM, then KILL after the grace
    /// period.
    Kill(cmd::kill::Args),
    /// Write to a process's stdin: a line, or keys (Enter, C-c, Up …) for a program on a
    /// terminal.
    Send(cmd::send::Args),
    /// Wait until a process ends, or its output matches a pattern.
    Wait(cmd::wait::Args),
    /// Show a process's output live and type into its stdin (answer a prompt yourself); a
    /// process on a terminal (--tty) takes this terminal over until Ctrl-].
    Attach(cmd::attach::Args),
    /// Print what a process on a terminal (--tty) shows right now.
    Screen(cmd::screen::Args),
    /// Change the size of a process's terminal (--tty); the program gets SIGWINCH.
    Resize(cmd::resize::Args),
    /// Remove the records of finished processes (and their output).
    Prune(cmd::prune::Args),
    /// Let a command that awaits a person's approval run (awaiting_approval); --always
    /// remembers it.
    Approve(cmd::approvals::ApproveArgs),
    /// Refuse a command that awaits approval (or a password), with a reason the model is told.
    Deny(cmd::approvals::DenyArgs),
    /// What waits for a person's answer, and the remembered approvals (`approvals forget`).
    Approvals(cmd::approvals::ApprovalsArgs),
    /// Give the password a program in a command's tree asks for (sudo -A, ssh, git), typed
    /// here unseen: the agent never sees it.
    Answer(cmd::approvals::AnswerArgs),
    /// The cubad daemon: status, start, stop, restart, upgrade.
    Daemon(cmd::daemon::Args),
    /// The daemon's command policy: `cubactl policy check 'CMD'` says whether it would run
    /// CMD, by which rule, and which sub-commands it saw.
    Policy(cmd::policy::Args),
    /// The event log: processes started and ended, waiting for input, ports opened, limits
    /// hit, questions asked and answered (`-f` follows it, `--json` for one object per line).
    Events(cmd::events::Args),
    /// The audit log: every spawn decision and process end (`-f` follows it, `--json` for
    /// the raw lines).
    Audit(cmd::audit::Args),
    /// The configured hosts: how each is reached, whether its daemon answers, its version,
    /// OS, shell and running processes.
    Hosts(cmd::hosts::Args),
    /// Bearer tokens of the HTTP endpoint: create (printed once), list, revoke.
    Token(cmd::token::Args),
    /// The HTTP endpoint (`cuba-exec serve --http`) in the background: start, stop, status.
    Http(cmd::http::Args),
    /// This machine's daemon on stdin/stdout, for a client elsewhere: `ssh HOST cubactl
    /// bridge`.
    Bridge(cmd::bridge::Args),
    /// Add the cuba-exec MCP server to coding clients' user config (Claude Code, Codex,
    /// Cursor, VS Code, Gemini CLI …); --remove takes it out.
    Setup(cmd::setup::Args),
    /// Print a shell completion script: `cubactl completions bash > ~/.local/share/bash-completion/completions/cubactl`.
    Completions(cmd::completions::Args),
    /// Print the manual page (roff): `cubactl man | man -l -`.
    Man(cmd::man::Args),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // A person's connection (an approval, a password typed) is not for another process.
    cuba_protocol::private::keep_to_itself();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let from_cli = matches.value_source("host") == Some(ValueSource::CommandLine);
    let mut host = cli.host.or_else(|| {
        std::env::var("CUBA_EXEC_HOST")
            .ok()
            .filter(|h| !h.is_empty())
    });
    match cli.command {
        Command::Bridge(_) if from_cli && !cuba_protocol::hosts::is_local(host.as_deref()) => {
            eprintln!(
                "cubactl bridge: --host makes no sense here: a bridge serves this machine's \
                 daemon (run it on the other host, as that host's bridge command)"
            );
            return ExitCode::from(2);
        }
        // CUBA_EXEC_HOST is inherited by a bridge command run here (`sh -c … cubactl bridge`);
        // a bridge always serves this machine.
        Command::Bridge(_)
        | Command::Completions(_)
        | Command::Man(_)
        | Command::Setup(_)
        | Command::Token(_)
        | Command::Http(_) => host = None,
        // Every host: an exported CUBA_EXEC_HOST does not narrow it (a typed --host is
        // refused there, as a contradiction).
        Command::Ps(ref a) if a.all_hosts && !from_cli => host = None,
        _ => {}
    }
    let needs_hosts = match &cli.command {
        Command::Hosts(_) => true,
        Command::Ps(a) => a.all_hosts,
        _ => false,
    };
    let ctx = match Ctx::new(cli.socket, host, cli.color, needs_hosts) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("cubactl: {e}");
            return exit::failed();
        }
    };
    let result = match cli.command {
        Command::Ps(a) if a.all_hosts => cmd::ps_all::run(&ctx, &a).await,
        Command::Ps(a) => cmd::ps::run(&ctx, a).await,
        Command::Ports(a) => cmd::ports::run(&ctx, a).await,
        Command::Info(a) => cmd::info::run(&ctx, a).await,
        Command::Tail(a) => cmd::tail::run(&ctx, a).await,
        Command::Logs(a) => cmd::logs::run(&ctx, a).await,
        Command::Run(a) => cmd::run::run(&ctx, a).await,
        Command::Start(a) => cmd::start::run(&ctx, a).await,
        Command::Kill(a) => cmd::kill::run(&ctx, a).await,
        Command::Send(a) => cmd::send::run(&ctx, a).await,
        Command::Wait(a) => cmd::wait::run(&ctx, a).await,
        Command::Attach(a) => cmd::attach::run(&ctx, a).await,
        Command::Screen(a) => cmd::screen::run(&ctx, a).await,
        Command::Resize(a) => cmd::resize::run(&ctx, a).await,
        Command::Prune(a) => cmd::prune::run(&ctx, a).await,
        Command::Approve(a) => cmd::approvals::approve(&ctx, a).await,
        Command::Deny(a) => cmd::approvals::deny(&ctx, a).await,
        Command::Approvals(a) => cmd::approvals::approvals(&ctx, a).await,
        Command::Answer(a) => cmd::approvals::answer(&ctx, a).await,
        Command::Daemon(a) => cmd::daemon::run(&ctx, a).await,
        Command::Policy(a) => cmd::policy::run(&ctx, a).await,
        Command::Audit(a) => cmd::audit::run(&ctx, a).await,
        Command::Events(a) => cmd::events::run(&ctx, a).await,
        Command::Hosts(a) => cmd::hosts::run(&ctx, a).await,
        Command::Bridge(a) => cmd::bridge::run(&ctx, a).await,
        Command::Setup(a) => cmd::setup::run(a),
        Command::Token(a) => cmd::token::run(&ctx, a).await,
        Command::Http(a) => cmd::http::run(&ctx, a).await,
        Command::Completions(a) => cmd::completions::run(a),
        Command::Man(a) => cmd::man::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A container that stopped under the command says so instead of a bare "closed".
            let lost = e
                .chain()
                .find_map(|c| c.downcast_ref::<cuba_protocol::client::ClientError>())
                .is_some_and(|c| c.connection_lost());
            if let (true, Some(host)) = (lost, ctx.host.as_deref()) {
                if let Some(why) = ctx.hosts().why_dropped(host).await {
                    eprintln!("cubactl: {why}");
                    return exit::failed();
                }
            }
            exit::report(&e, ctx.host.as_deref())
        }
    }
}

/// The clap definition, for completions and the man page.
pub fn cli_command() -> clap::Command {
    Cli::command()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_valid() {
        super::cli_command().debug_assert();
    }
}
