//! `cubactl http start|stop|status`: the HTTP endpoint (`cuba-exec serve --http`) as a
//! background service of its own, found through `http.json` in the state directory (written
//! by the endpoint while it serves). `cubactl setup --http` writes a systemd or launchd unit
//! instead, for an endpoint that outlives logins and reboots.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use cuba_protocol::client::ClientError;
use cuba_protocol::{ErrorKind, Verb};

use crate::ctx::Ctx;
use crate::exit;

const HELP: &str = "\
Examples:
  cubactl token create laptop        a token for the client (printed once)
  cubactl http start                 serve http://127.0.0.1:8765/mcp in the background
  cubactl http start 127.0.0.1:9000  on another port ([http] listen in config.toml for good)
  cubactl http status                is it serving, where, since when
  cubactl http stop

Its log is http.log in the state directory. Off loopback it needs TLS ([http] tls_cert and
tls_key) or behind_proxy = true; see docs/http.md.";

#[derive(clap::Args, Debug)]
#[command(after_help = HELP)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Start serving in the background (`cuba-exec serve --http`).
    Start {
        /// Where to listen [default: [http] listen, else 127.0.0.1:8765].
        #[arg(value_name = "ADDR")]
        addr: Option<String>,
        /// The directory holding cuba-exec [default: this cubactl's own directory, else PATH].
        #[arg(long, value_name = "DIR")]
        bin_dir: Option<PathBuf>,
    },
    /// Stop the endpoint (TERM; running processes are the daemon's and go on).
    Stop,
    /// Whether it serves, and where.
    Status {
        /// Print JSON ({"running": false} when it does not serve).
        #[arg(long)]
        json: bool,
    },
}

/// How long a start may take to serve, and a stop to end.
const WAIT: Duration = Duration::from_secs(10);

/// The endpoint serving now, from its `http.json`: its pid and URL.
pub fn running(state: &Path) -> Option<serde_json::Value> {
    let text = cuba_protocol::safe_fs::read_to_string(&state.join("http.json")).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = i32::try_from(doc.get("pid")?.as_u64()?).ok()?;
    alive(pid).then_some(doc)
}

#[cfg(unix)]
fn alive(pid: i32) -> bool {
    crate::platform::procs::alive(pid)
}

#[cfg(not(unix))]
fn alive(_pid: i32) -> bool {
    true
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let state = cuba_protocol::paths::state_dir();
    match args.action {
        Action::Status { json } => {
            let doc = running(&state);
            let code = if doc.is_some() {
                ExitCode::SUCCESS
            } else {
                exit::failed()
            };
            if json {
                let v = match doc {
                    Some(mut d) => {
                        d["running"] = true.into();
                        d
                    }
                    None => serde_json::json!({ "running": false }),
                };
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                match &doc {
                    Some(d) => println!("{}", describe(d)),
                    None => println!("the HTTP endpoint is not running (`cubactl http start`)"),
                }
            }
            Ok(code)
        }
        Action::Start { addr, bin_dir } => {
            // A person's verb: the daemon refuses it to a command it runs.
            ctx.connect().await?.authorize(Verb::HttpStart).await?;
            start(&state, addr, bin_dir)
        }
        Action::Stop => stop(ctx, &state).await,
    }
}

/// `serving http://127.0.0.1:8765/mcp (pid 42, for 3m05s)`.
pub fn describe(doc: &serde_json::Value) -> String {
    let url = doc["public_url"]
        .as_str()
        .or(doc["url"].as_str())
        .unwrap_or("?");
    let since = doc["started_ms"].as_u64().unwrap_or(0);
    format!(
        "serving {url} (pid {}, for {})",
        doc["pid"],
        crate::units::age(cuba_protocol::now_ms().saturating_sub(since))
    )
}

fn start(state: &Path, addr: Option<String>, bin_dir: Option<PathBuf>) -> Result<ExitCode> {
    if let Some(doc) = running(state) {
        println!("already {}", describe(&doc));
        return Ok(ExitCode::SUCCESS);
    }
    let exe = server_binary(bin_dir);
    cuba_protocol::safe_fs::owner_only_dir()
        .recursive(true)
        .create(state)
        .with_context(|| format!("cannot create {}", state.display()))?;
    let log_path = state.join("http.log");
    let log = cuba_protocol::safe_fs::open_append(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let from = log.metadata().map_or(0, |m| m.len());
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["serve", "--http"])
        .args(addr)
        // The endpoint writes its log there itself, rotated; stderr (the same file) keeps
        // what it says before its log is set up.
        .env("CUBA_EXEC_HTTP_LOG", &log_path)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    detach(&mut cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let deadline = Instant::now() + WAIT;
    let pid = child.id();
    loop {
        if let Some(doc) = running(state).filter(|d| d["pid"].as_u64() == Some(u64::from(pid))) {
            println!("{}", describe(&doc));
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(status) = child.try_wait()? {
            let said = std::fs::read(&log_path)
                .map(|b| String::from_utf8_lossy(&b[(from as usize).min(b.len())..]).into_owned())
                .unwrap_or_default();
            bail!(
                "the endpoint did not start ({status}): {}",
                said.trim().trim_start_matches("cuba-exec: ")
            );
        }
        if Instant::now() >= deadline {
            bail!(
                "the endpoint (pid {pid}) is not serving after {} s; see {}",
                WAIT.as_secs(),
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asks the daemon to stop the endpoint (a person's verb: refused to a command it runs), then
/// waits for it to end.
async fn stop(ctx: &Ctx, state: &Path) -> Result<ExitCode> {
    let Some(doc) = running(state) else {
        println!("the HTTP endpoint is not running");
        return Ok(ExitCode::SUCCESS);
    };
    let pid = doc["pid"].as_u64().and_then(|p| i32::try_from(p).ok());
    let Some(pid) = pid else {
        bail!("http.json names no pid");
    };
    match ctx.connect().await?.http_stop(pid as u32).await {
        Ok(()) => {}
        Err(ClientError::Remote(e)) if e.kind == ErrorKind::NotFound => {
            println!("the HTTP endpoint is not running");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    }
    let deadline = Instant::now() + WAIT;
    while alive(pid) {
        if Instant::now() >= deadline {
            bail!(
                "the endpoint (pid {pid}) is still running {} s after TERM",
                WAIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("stopped the HTTP endpoint (pid {pid})");
    Ok(ExitCode::SUCCESS)
}

/// In a session of its own: a terminal closing does not end it.
#[cfg(unix)]
fn detach(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches nothing of the parent's.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
}

#[cfg(not(unix))]
fn detach(_cmd: &mut std::process::Command) {}

/// `cuba-exec` in `bin_dir`, else beside this cubactl, else on PATH.
pub fn server_binary(bin_dir: Option<PathBuf>) -> PathBuf {
    let name = if cfg!(windows) {
        "cuba-exec.exe"
    } else {
        "cuba-exec"
    };
    if let Some(dir) = bin_dir {
        return dir.join(name);
    }
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}
