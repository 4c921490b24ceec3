//! `cubactl token create|list|revoke`: the bearer tokens of the HTTP endpoint (`cuba-exec serve
//! --http`). A token is printed once, when it is made; `tokens.toml` keeps only its SHA-256.
//! The endpoint reads the file again when it changes: a revoked token fails on its next request.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Subcommand;
use cuba_protocol::tokens::{self, Entry, Tokens};

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
}

pub fn run(args: Args) -> Result<ExitCode> {
    let path = tokens::file(&|k| std::env::var(k).ok());
    let mut file = Tokens::load(&path).map_err(anyhow::Error::msg)?;
    match args.action {
        Action::Create(a) => {
            tokens::check_name(&a.name).map_err(anyhow::Error::msg)?;
            if file.tokens.contains_key(&a.name) && !a.replace {
                bail!(
                    "a token named {:?} exists; `cubactl token revoke {0}` first, or --replace",
                    a.name
                );
            }
            if file.tokens.len() >= tokens::MAX_TOKENS && !file.tokens.contains_key(&a.name) {
                bail!(
                    "{} tokens exist, the most kept; revoke some",
                    tokens::MAX_TOKENS
                );
            }
            let now = now();
            let expires = match &a.expires {
                Some(t) => Some(
                    now + units::parse_duration(t)
                        .map_err(anyhow::Error::msg)?
                        .as_secs(),
                ),
                None => None,
            };
            let roots = match a.roots {
                Some(dirs) => Some(absolute(dirs)?),
                None => None,
            };
            let token = tokens::generate()?;
            file.tokens.insert(
                a.name.clone(),
                Entry {
                    hash: tokens::hash(&token),
                    created: now,
                    expires,
                    hosts: a.hosts,
                    allow: a.allow,
                    roots,
                },
            );
            file.save(&path).map_err(anyhow::Error::msg)?;
            println!("{token}");
            if std::io::stderr().is_terminal() {
                eprintln!(
                    "token {:?} made; it is shown this once ({} keeps only its hash). A client \
                     sends it as `Authorization: Bearer <token>`.",
                    a.name,
                    path.display()
                );
            }
        }
        Action::List { json } => {
            let now = now();
            if json {
                let rows: Vec<serde_json::Value> = file
                    .tokens
                    .iter()
                    .map(|(name, e)| {
                        serde_json::json!({
                            "name": name,
                            "created": e.created,
                            "expires": e.expires,
                            "expired": e.expires.is_some_and(|t| now >= t),
                            "hosts": e.hosts,
                            "allow": e.allow,
                            "roots": e.roots,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(ExitCode::SUCCESS);
            }
            if file.tokens.is_empty() {
                println!(
                    "no tokens ({}); `cubactl token create NAME` makes one",
                    path.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            println!("{:<20} {:<10} {:<12} SCOPE", "NAME", "AGE", "EXPIRES");
            for (name, e) in &file.tokens {
                let age = units::age(now.saturating_sub(e.created) * 1000);
                let expires = match e.expires {
                    None => "never".to_string(),
                    Some(t) if now >= t => "expired".to_string(),
                    Some(t) => format!("in {}", units::age((t - now) * 1000)),
                };
                println!("{name:<20} {age:<10} {expires:<12} {}", scope(e));
            }
        }
        Action::Revoke { name } => {
            if file.tokens.remove(&name).is_none() {
                bail!("no token named {name:?} (`cubactl token list`)");
            }
            file.save(&path).map_err(anyhow::Error::msg)?;
            println!("revoked {name:?}: its next request gets 401");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn scope(e: &Entry) -> String {
    let mut parts = Vec::new();
    if let Some(h) = &e.hosts {
        parts.push(format!("hosts={}", h.join(",")));
    }
    if let Some(a) = &e.allow {
        parts.push(format!("allow={}", a.join(",")));
    }
    if let Some(r) = &e.roots {
        parts.push(format!("roots={}", r.join(",")));
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
