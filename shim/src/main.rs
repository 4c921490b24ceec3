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
       cuba-exec serve --http [ADDR]

  serve --http [ADDR]   serve MCP over streamable HTTP at http://ADDR/mcp instead, for clients
                        that cannot launch a process (default 127.0.0.1:8765, or [http] listen
                        in config.toml). Every request needs a bearer token: `cubactl token
                        create NAME`. Off loopback it needs TLS ([http] tls_cert, tls_key) or
                        behind_proxy = true. `cubactl http start` runs it in the background.

Set-up: `cubactl setup` adds cuba-exec to every MCP client it finds (`cubactl setup --help`).
By hand: `cubactl` runs, lists, follows and stops the same processes from a terminal.

Environment (also in config.toml, see docs/config.md):
  CUBA_EXEC_SOCKET       the daemon's socket
  CUBA_EXEC_STATE_DIR    where the daemon keeps its journal, spool and log
  CUBA_EXEC_CONFIG       the config file
  CUBA_EXEC_TOKENS       the HTTP endpoint's tokens file (default: tokens.toml beside config)
  CUBA_EXEC_STRUCTURED   auto | always | never: structured results beside the text
  CUBA_EXEC_MAX_OUTPUT   the output a reply shows by default, in bytes
  CUBA_EXEC_LOG          the log filter (stderr), e.g. debug
";

const USAGE: &str = "Usage: cuba-exec [--help | --version]\n       cuba-exec serve --http [ADDR]";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Stdio,
    Help,
    Version,
    /// `serve --http`, with the address it names.
    Http(Option<String>),
}

/// What the command line asks for; `Err` is a usage error to print.
fn parse_args(args: &[String]) -> Result<Mode, String> {
    match args {
        [] => Ok(Mode::Stdio),
        [a] if a == "--help" || a == "-h" => Ok(Mode::Help),
        [a] if a == "--version" || a == "-V" => Ok(Mode::Version),
        [s, h] if s == "serve" && h == "--http" => Ok(Mode::Http(None)),
        [s, h, addr] if s == "serve" && h == "--http" => Ok(Mode::Http(Some(addr.clone()))),
        [s, h] if s == "serve" && (h == "--help" || h == "-h") => Ok(Mode::Help),
        [s, ..] if s == "serve" => Err(format!(
            "cuba-exec: serve takes --http [ADDR] (streamable HTTP is the one network \
             transport)\n\n{USAGE}"
        )),
        [a, ..] => Err(format!("cuba-exec: unknown argument {a:?}\n\n{USAGE}")),
    }
}

fn main() -> ExitCode {
    // Its connection to the daemon is the client's: no other process takes it (pidfd_getfd).
    cuba_protocol::private::keep_to_itself();
    let args: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<_, _>>()
    {
        Ok(a) => a,
        Err(a) => {
            eprintln!("cuba-exec: argument {a:?} is not UTF-8\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mode = match parse_args(&args) {
        Ok(m) => m,
        Err(usage) => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    match mode {
        Mode::Help => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Mode::Version => {
            println!(
                "cuba-exec {} (protocol {})",
                cuba_protocol::VERSION,
                cuba_protocol::PROTOCOL_VERSION
            );
            return ExitCode::SUCCESS;
        }
        Mode::Http(addr) => return serve_http(addr.as_deref()),
        Mode::Stdio => {}
    }
    if std::io::stdin().is_terminal() {
        // A person ran it by hand: it would otherwise wait in silence for JSON.
        eprintln!(
            "cuba-exec is an MCP server: an editor or coding agent launches it and speaks MCP on \
             its stdin. To add it to your clients run `cubactl setup`; to run commands yourself \
             use `cubactl`. Waiting for MCP messages here (Ctrl-D ends)."
        );
    }
    match runtime(tokio::runtime::Builder::new_current_thread()) {
        Ok(r) => r.block_on(serve()),
        Err(code) => code,
    }
}

/// The runtime `builder` makes, or the exit after saying why there is none.
fn runtime(mut builder: tokio::runtime::Builder) -> Result<tokio::runtime::Runtime, ExitCode> {
    builder.enable_all().build().map_err(|e| {
        eprintln!("cuba-exec: cannot start the async runtime: {e}");
        ExitCode::FAILURE
    })
}

/// `serve --http`: many sessions at once, so a runtime with a worker per core.
fn serve_http(addr: Option<&str>) -> ExitCode {
    init_http_log();
    let settings = match cuba_exec::http::settings::Settings::load(&|k| std::env::var(k).ok(), addr)
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cuba-exec: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime(tokio::runtime::Builder::new_multi_thread()) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match runtime.block_on(cuba_exec::http::serve(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuba-exec: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The endpoint's log: INFO, without a line per session or notification (rmcp's, at its
/// WARN); to the file `cubactl http start` names, rotated, else to stderr.
fn init_http_log() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CUBA_EXEC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let file = std::env::var_os(cuba_exec::http::log::ENV).map(std::path::PathBuf::from);
    let rotating = file.and_then(|path| {
        match cuba_exec::http::log::Rotating::new(&path, cuba_exec::http::log::MAX_BYTES) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!(
                    "cuba-exec: cannot open {}: {e}; logging to stderr",
                    path.display()
                );
                None
            }
        }
    });
    let builder = tracing_subscriber::fmt()
        .with_ansi(false)
        .log_internal_errors(false)
        .with_env_filter(filter);
    match rotating {
        Some(r) => builder.with_writer(r).init(),
        None => builder.with_writer(std::io::stderr).init(),
    }
}

fn init_log(default: &str) {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // An editor may close our stderr: the formatter's own report of that would panic.
        .log_internal_errors(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CUBA_EXEC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .init();
}

async fn serve() -> ExitCode {
    init_log("warn");
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_command_line_is_read() {
        assert_eq!(parse_args(&args(&[])), Ok(Mode::Stdio));
        assert_eq!(
            parse_args(&args(&["serve", "--http"])),
            Ok(Mode::Http(None))
        );
        assert_eq!(
            parse_args(&args(&["serve", "--http", "127.0.0.1:9"])),
            Ok(Mode::Http(Some("127.0.0.1:9".into())))
        );
        assert!(parse_args(&args(&["serve"])).is_err());
        assert!(parse_args(&args(&["serve", "--ws"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }
}
