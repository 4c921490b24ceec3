//! `cubad` on Windows: takes the user's lock, creates the user's named pipe, and serves until a
//! client's shutdown request. Clients start it detached, with no console.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use cuba_daemon::platform::transport::Listener;
use cuba_daemon::platform::windows::lock::{take as take_lock, Taken};
use cuba_daemon::Config;
use cuba_protocol::paths;

/// The cuba-exec supervisor. Clients (cuba-exec, cubactl) start it on demand; run it by hand
/// only to watch its log in the foreground.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Pipe to serve [default: $CUBA_EXEC_SOCKET, else \\.\pipe\cuba-exec-<your SID>]
    #[arg(long)]
    socket: Option<PathBuf>,
    /// State directory: spools, log, lock [default: $CUBA_EXEC_STATE_DIR, else
    /// %LOCALAPPDATA%\cuba-exec]
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

pub fn main() -> ExitCode {
    match setup(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cubad: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn setup(args: Args) -> Result<()> {
    // Its stdio (the log) is no command's.
    cuba_protocol::win::no_inherited_stdio();
    let socket = args.socket.unwrap_or_else(paths::socket_path);
    let state_dir = args.state_dir.unwrap_or_else(paths::state_dir);
    let mut defaults = Config::new(socket, state_dir);
    defaults.shell = cuba_daemon::platform::windows::default_shell();
    let config = defaults
        .load(|k| std::env::var(k).ok())
        .context("bad configuration")?;
    tracing_subscriber::fmt()
        .with_writer(|| cuba_daemon::health::LogWriter)
        .with_ansi(false)
        .log_internal_errors(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CUBA_EXEC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    cuba_daemon::private_dir::ensure(
        &config.state_dir,
        "state directory",
        "set CUBA_EXEC_STATE_DIR (or --state-dir) to a directory of your own",
    )
    .map_err(anyhow::Error::msg)?;
    let lock_path = config.state_dir.join("cubad.lock");
    let _lock = match take_lock(&lock_path)
        .with_context(|| format!("cannot open lock file {}", lock_path.display()))?
    {
        Taken::Ours(file) => file,
        Taken::Held(pid) => {
            // Another daemon serves this user: the client connects to it.
            eprintln!("cubad: already running (pid {pid}) for this user");
            return Ok(());
        }
    };
    // One thread, as on Unix: a request, its spawn and its reply are handed from task to task
    // on it. The pipes' blocking reads have threads of their own.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Attached to a command's console for a moment (a Ctrl-Break), the daemon must not be
        // ended by an event meant for that console.
        cuba_daemon::platform::windows::console::ignore_ctrl_c();
        let first = cuba_protocol::win::pipe_server(&config.socket, true)
            .with_context(|| format!("cannot create the pipe {}", config.socket.display()))?;
        let listener = Listener::new(config.socket.clone(), first);
        // Serves until a client's shutdown request; every tree still running is ended then
        // (and with the daemon in any case: each job is killed when its handle closes).
        cuba_daemon::run(config, listener, (), None, std::future::pending()).await
    })
}
