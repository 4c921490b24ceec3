//! `cubactl`: the human side of the shared process table.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use cuba_protocol::client::{this_client, Client};
use cuba_protocol::{
    paths, ClientKind, ListRequest, ProcessInfo, ShutdownRequest, Signal, SignalRequest,
    SpawnRequest,
};

/// Watch and steer the processes that agents and people run through cuba-exec.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List every process in the shared table.
    Ps {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Start a command in the background and print its id.
    Start {
        /// A label shown in the table.
        #[arg(long)]
        name: Option<String>,
        /// The command and its arguments (joined with spaces and run by /bin/sh).
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Stop processes (their whole tree): SIGTERM, then SIGKILL after the grace period.
    Kill {
        /// Signal to send instead (TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT).
        #[arg(short, long, default_value = "TERM")]
        signal: Signal,
        #[arg(required = true)]
        ids: Vec<u64>,
    },
    /// The daemon itself.
    Daemon {
        #[command(subcommand)]
        action: DaemonAction,
    },
}

#[derive(Subcommand, Debug)]
enum DaemonAction {
    /// Version, pid, socket and process counts.
    Status,
    /// Stop the daemon.
    Stop {
        /// Also stop running processes (gracefully) instead of refusing.
        #[arg(long)]
        force: bool,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cubactl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn connect(autostart: bool) -> Result<Client> {
    let socket = paths::socket_path();
    let me = this_client(ClientKind::Cli, "cubactl");
    let client = if autostart {
        Client::connect_or_start(&socket, me).await?
    } else {
        Client::connect(&socket, me).await?
    };
    Ok(client)
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Ps { json } => {
            let client = connect(true).await?;
            let list = client.list(ListRequest::default()).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                print_table(&list);
            }
        }
        Command::Start { name, cmd } => {
            let client = connect(true).await?;
            let info = client
                .spawn(SpawnRequest {
                    command: cmd.join(" "),
                    cwd: None,
                    env: Vec::new(),
                    shell: None,
                    stdin: None,
                    close_stdin: false,
                    timeout_ms: None,
                    name,
                })
                .await?;
            if let Some(err) = &info.error {
                eprintln!("cubactl: process {} failed to start: {err}", info.id);
                return Ok(ExitCode::FAILURE);
            }
            println!("{}", info.id);
        }
        Command::Kill { signal, ids } => {
            let client = connect(true).await?;
            let mut failed = false;
            for id in ids {
                let req = SignalRequest {
                    id,
                    signal,
                    escalate: signal == Signal::Term,
                    grace_ms: None,
                    wait: true,
                };
                match client.signal(req).await {
                    Ok(info) => println!("{id}: {}", describe(&info)),
                    Err(e) => {
                        eprintln!("cubactl: {id}: {e}");
                        failed = true;
                    }
                }
            }
            if failed {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Daemon { action } => match action {
            DaemonAction::Status => {
                let client = connect(false).await.context("cubad is not running")?;
                let s = client.status().await?;
                println!(
                    "cubad {} (protocol {}) pid {}\nsocket {}\nstate  {}\n{} running of {} \
                     records, {} client(s)",
                    s.daemon_version,
                    s.protocol_version,
                    s.pid,
                    s.socket,
                    s.state_dir,
                    s.running,
                    s.total,
                    s.clients
                );
            }
            DaemonAction::Stop { force } => {
                let client = connect(false).await.context("cubad is not running")?;
                client
                    .call(cuba_protocol::Request::Shutdown(ShutdownRequest { force }))
                    .await?;
                println!("cubad stopping");
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(info: &ProcessInfo) -> String {
    match (info.exit_code, info.signal) {
        (_, Some(sig)) => format!("{} ({sig})", info.state),
        (Some(code), None) => format!("{} (code {code})", info.state),
        _ => info.state.to_string(),
    }
}

fn print_table(list: &[ProcessInfo]) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    println!(
        "{:>4} {:>7} {:<12} {:<16} {:<16} {:>8}  COMMAND",
        "ID", "PID", "NAME", "OWNER", "STATE", "TIME"
    );
    for p in list {
        let command: String = p.command.replace('\n', " ").chars().take(60).collect();
        println!(
            "{:>4} {:>7} {:<12} {:<16} {:<16} {:>7.1}s  {command}",
            p.id,
            p.pid,
            p.name.as_deref().unwrap_or("-"),
            format!("{}:{}", p.owner.name, p.owner.pid),
            describe(p),
            p.elapsed_ms(now) as f64 / 1000.0,
        );
    }
}
