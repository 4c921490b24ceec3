//! `cubactl token create|list|revoke`: the bearer tokens of the HTTP endpoint (`cuba-exec serve
//! --http`), kept by the daemon. A token is made by the daemon and printed once; `tokens.toml`
//! keeps only its SHA-256. The endpoint asks the daemon about every request's token: a revoked
//! token fails on its next request. Making and revoking are a person's: refused from inside a
//! command cuba-exec runs.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use cuba_protocol::tokens;
use cuba_protocol::{Budget, TokenCreate, TokenInfo};

use crate::ctx::Ctx;
use crate::units;

const HELP: &str = "\
A token lets one client (a device, a hosted agent, a claude.ai or ChatGPT connector) call the
HTTP endpoint: `Authorization: Bearer <token>`. What it starts is owned by the token's name
(`cubactl ps --owner NAME`, `cubactl kill --owner NAME`). Its scope narrows the policy, never
widens it.

Examples:
  cubactl token create phone --expires 30d
  cubactl token create ci --hosts build --allow make,cargo --roots ~/src/app
  cubactl token list
  cubactl token revoke phone";

#[derive(clap::Args, Debug)]
#[command(after_help = HELP)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Make a token and print it (once: only its hash is kept).
    Create(CreateArgs),
    /// The tokens: name, scope, age, expiry (never the tokens themselves).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token: its next request gets 401.
    Revoke {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

#[derive(clap::Args, Debug)]
struct CreateArgs {
    /// Its name: the owner of what it starts (letters, digits, '-', '_', '.', '@').
    #[arg(value_name = "NAME")]
    name: String,
    /// Only these hosts besides this machine (`[hosts.NAME]`), comma-separated.
    #[arg(long, value_name = "HOST,...", value_delimiter = ',')]
    hosts: Option<Vec<String>>,
    /// Only these commands (as allowed_commands), comma-separated.
    #[arg(long, value_name = "CMD,...", value_delimiter = ',')]
    allow: Option<Vec<String>>,
    /// Only below these directories (as allowed_dirs); the first is where commands start.
    #[arg(long, value_name = "DIR,...", value_delimiter = ',')]
    roots: Option<Vec<std::path::PathBuf>>,
    /// It stops working after this long (30d, 12h, 90m) [default: never].
    #[arg(long, value_name = "DURATION")]
    expires: Option<String>,
    /// Replace an existing token of this name (the old one stops working).
    #[arg(long)]
    replace: bool,
    /// Its budget: CPU cores over everything it starts together (0.5, 2).
    #[arg(long, value_name = "CORES")]
    cpu: Option<String>,
    /// Its budget: memory over everything it starts together (512M, 4G).
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Its budget: processes and threads at once over everything it starts.
    #[arg(long, value_name = "N")]
    pids: Option<u64>,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let client = ctx.connect().await?;
    match args.action {
        Action::Create(a) => {
            tokens::check_name(&a.name).map_err(anyhow::Error::msg)?;
            let expires_in = match &a.expires {
                Some(t) => Some(
                    units::parse_duration(t)
                        .map_err(anyhow::Error::msg)?
                        .as_secs(),
                ),
                None => None,
            };
            let roots = match a.roots {
                Some(dirs) => Some(absolute(dirs)?),
                None => None,
            };
            let budget = Budget {
                cpu_millis: match &a.cpu {
                    Some(c) => Some(Budget::parse_cpu(c).map_err(anyhow::Error::msg)?),
                    None => None,
                },
                memory: match &a.memory {
                    Some(m) => Some(units::parse_size(m).map_err(anyhow::Error::msg)?),
                    None => None,
                },
                pids: a.pids.filter(|n| *n > 0),
            };
            let made = client
                .token_create(TokenCreate {
                    name: a.name.clone(),
                    hosts: a.hosts,
                    allow: a.allow,
                    roots,
                    expires_in,
                    replace: a.replace,
                    budget: (!budget.is_empty()).then_some(budget),
                })
                .await?;
            println!("{}", made.token);
            if std::io::stderr().is_terminal() {
                eprintln!(
                    "token {:?} made; it is shown this once ({} keeps only its hash). A client \
                     sends it as `Authorization: Bearer <token>`.",
                    a.name, made.file
                );
            }
        }
        Action::List { json } => {
            let list = client.token_list().await?;
            let now = now();
            for line in &list.unconfirmed {
                eprintln!("cubactl: not in effect until `cubactl daemon reload`: {line}");
            }
            if json {
                let rows: Vec<serde_json::Value> = list
                    .tokens
                    .iter()
                    .map(|t| {
                        serde_json::json!({
                            "name": t.name,
                            "created": t.created,
                            "expires": t.expires,
                            "expired": t.expires.is_some_and(|e| now >= e),
                            "hosts": t.hosts,
                            "allow": t.allow,
                            "roots": t.roots,
                            "budget": t.budget.map(|b| serde_json::json!({
                                "cpu_millis": b.cpu_millis,
                                "memory": b.memory,
                                "pids": b.pids,
                            })),
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(ExitCode::SUCCESS);
            }
            if list.tokens.is_empty() {
                println!(
                    "no tokens ({}); `cubactl token create NAME` makes one",
                    list.file
                );
                return Ok(ExitCode::SUCCESS);
            }
            println!("{:<20} {:<10} {:<12} SCOPE", "NAME", "AGE", "EXPIRES");
            for t in &list.tokens {
                let age = units::age(now.saturating_sub(t.created) * 1000);
                let expires = match t.expires {
                    None => "never".to_string(),
                    Some(e) if now >= e => "expired".to_string(),
                    Some(e) => format!("in {}", units::age((e - now) * 1000)),
                };
                println!("{:<20} {age:<10} {expires:<12} {}", t.name, scope(t));
            }
        }
        Action::Revoke { name } => {
            client.token_revoke(&name).await?;
            println!("revoked {name:?}: its next request gets 401");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn scope(t: &TokenInfo) -> String {
    let mut parts = Vec::new();
    if let Some(h) = &t.hosts {
        parts.push(format!("hosts={}", h.join(",")));
    }
    if let Some(a) = &t.allow {
        parts.push(format!("allow={}", a.join(",")));
    }
    if let Some(r) = &t.roots {
        parts.push(format!("roots={}", r.join(",")));
    }
    if let Some(b) = &t.budget {
        parts.push(format!("budget=({b})"));
    }
    match parts.is_empty() {
        true => "all policy allows".into(),
        false => parts.join(" "),
    }
}

/// Roots as absolute paths (the daemon checks directories as given).
fn absolute(dirs: Vec<std::path::PathBuf>) -> Result<Vec<String>> {
    dirs.into_iter()
        .map(|d| {
            let abs = std::path::absolute(&d)?;
            let text = abs.to_str().map(str::to_string);
            text.ok_or_else(|| anyhow::anyhow!("{} is not UTF-8", abs.display()))
        })
        .collect()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
