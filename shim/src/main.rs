//! `cuba-exec`: serve MCP on stdin/stdout. Logs go to stderr; stdout carries only the protocol.

use std::io::IsTerminal;
use std::process::ExitCode;

use cuba_exec::transport::LineTransport;
use cuba_exec::CubaExec;
use rmcp::service::ServerInitializeError;
use rmcp::ServiceExt;

const HELP: &str = "\
cuba-exec: the MCP server of cuba-exec. An editor or coding agent (Claude Code, Codex, Cursor,
Gemini CLI, …) launches it and speaks MCP (JSON-RPC, one message per line) on its stdin and
stdout; it runs commands through the cubad daemon, which it starts when none is running.

Usage: cuba-exec [--help | --version]

Set-up: `cubactl setup` adds cuba-exec to every MCP client it finds (`cubactl setup --help`).
By hand: `cubactl` runs, lists, follows and stops the same processes from a terminal.

Environment (also in config.toml, see the README):
  CUBA_EXEC_SOCKET       the daemon's socket
  CUBA_EXEC_STATE_DIR    where the daemon keeps its journal, spool and log
  CUBA_EXEC_CONFIG       the config file
  CUBA_EXEC_STRUCTURED   auto | always | never: structured results beside the text
  CUBA_EXEC_MAX_OUTPUT   the output a reply shows by default, in bytes
  CUBA_EXEC_LOG          the log filter (stderr), e.g. debug
";

/// What the command line asks for; `Err` is a usage error to print.
fn parse_args() -> Result<Option<&'static str>, String> {
    let mut args = std::env::args_os().skip(1);
    match (args.next(), args.next()) {
        (None, _) => Ok(None),
        (Some(a), None) if a == "--help" || a == "-h" => Ok(Some("help")),
        (Some(a), None) if a == "--version" || a == "-V" => Ok(Some("version")),
        (Some(a), _) => Err(format!(
            "cuba-exec: unknown argument {:?}\n\nUsage: cuba-exec [--help | --version]",
            a.to_string_lossy()
        )),
    }
}

fn main() -> ExitCode {
    match parse_args() {
        Ok(Some("help")) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Ok(Some(_)) => {
            println!(
                "cuba-exec {} (protocol {})",
                cuba_protocol::VERSION,
                cuba_protocol::PROTOCOL_VERSION
            );
            return ExitCode::SUCCESS;
        }
        Ok(None) => {}
        Err(usage) => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    }
    if std::io::stdin().is_terminal() {
        // A person ran it by hand: it would otherwise wait in silence for JSON.
        eprintln!(
            "cuba-exec is an MCP server: an editor or coding agent launches it and speaks MCP on \
             its stdin. To add it to your clients run `cubactl setup`; to run commands yourself \
             use `cubactl`. Waiting for MCP messages here (Ctrl-D ends)."
        );
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cuba-exec: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve())
}

async fn serve() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // An editor may close our stderr: the formatter's own report of that would panic.
        .log_internal_errors(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CUBA_EXEC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let server = CubaExec::new(cuba_protocol::paths::socket_path());
    // Not rmcp's stdio transport: that one leaves a line it cannot parse unanswered.
    let (stdin, stdout) = cuba_exec::stdio::stdio();
    let service = match server.serve(LineTransport::new(stdin, stdout)).await {
        Ok(s) => s,
        // Its input ended before a client said hello (a probe, `cuba-exec < /dev/null`, a
        // client that gave up): nothing went wrong here.
        Err(ServerInitializeError::ConnectionClosed(_)) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuba-exec: {e}");
            return ExitCode::FAILURE;
        }
    };
    match service.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuba-exec: {e}");
            ExitCode::FAILURE
        }
    }
}
