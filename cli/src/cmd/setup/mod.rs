//! `setup`: writes (or prints, `--dry-run`) the MCP server entry for cuba-exec into each coding
//! client's user-level configuration, or takes it out again (`--remove`).
//!
//! `clients` says where each client keeps its servers and in what shape; `apply` edits one file
//! through `json_doc` / `codex_toml` (which keep everything else in it as it was) and `files`
//! (backups, atomic replace).

mod apply;
mod clients;
mod codex_toml;
mod dirs;
mod files;
mod json_doc;
mod jsonc;
mod sandbox;
mod service;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};

use self::apply::{Outcome, Plan, Status};
use self::clients::{Client, Dirs, Options, Server};
use crate::exit;

const EXAMPLES: &str = "\
Examples:
  cubactl setup                      every client found here gets the cuba-exec entry
  cubactl setup --dry-run            show each file and the entry, write nothing
  cubactl setup --client claude-code --client codex
  cubactl setup --client codex --codex-approve   let `codex exec` use run, start …
  cubactl setup --env CUBA_EXEC_SOCKET=/run/me/cubad.sock   an environment for the server
  cubactl setup --bin-dir ~/.local/bin          the cuba-exec there, not next to cubactl
  cubactl setup --remove             take the entry out of every client found
  cubactl setup --http               a systemd/launchd service for the HTTP endpoint
  cubactl setup --sandbox            the sandbox preset in the settings file (see below)

Clients: claude-code, claude-desktop, cursor, vscode, codex, gemini, opencode, windsurf, zed,
copilot, kilo, qwen, cline.
docs/setup.md lists the file each one reads and the entry written. Every other setting in a
file is kept; a file that does not parse is never rewritten, and one with comments (Zed, VS
Code) is shown the entry to paste. Before a file changes it is copied to FILE.bak-cubactl
(FILE.bak-cubactl.1 … when that exists). Restart a client to load the change.

--sandbox writes `sandbox = \"workspace-write\"`, `network = \"proxy\"` and a [proxy] table
allowing the package registries (npm, PyPI, crates.io, Go, RubyGems, Maven, GitHub) with
`unknown = \"ask\"` into config.toml, keeping every key you already set; it applies from the
daemon's next start.

Exit status: 0 every client done, 1 one failed (or a named client's file must be edited by
hand), 2 bad usage.";

#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// A client to set up (repeatable) [default: every client found on this machine: its
    /// config directory exists or its program is on PATH].
    #[arg(long = "client", value_name = "NAME", value_enum)]
    clients: Vec<Client>,
    /// The directory holding cuba-exec [default: this cubactl's own directory; unused with
    /// --remove].
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Add KEY=VALUE to the server's environment (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env, conflicts_with = "remove")]
    env: Vec<(String, String)>,
    /// Print each file and the entry it would get; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Take the cuba-exec entry out again (everything else stays).
    #[arg(long)]
    remove: bool,
    /// Codex: write default_tools_approval_mode = "approve" for cuba-exec, so `codex exec` may
    /// call the tools marked destructive (run, start, send_signal) without asking.
    #[arg(long, conflicts_with = "remove")]
    codex_approve: bool,
    /// Gemini CLI: write "trust": true for cuba-exec, skipping its confirmation of each call.
    #[arg(long, conflicts_with = "remove")]
    gemini_trust: bool,
    /// Qwen Code: write "trust": true for cuba-exec, skipping its confirmation of each call
    /// (without it a headless `qwen -p` refuses every call).
    #[arg(long, conflicts_with = "remove")]
    qwen_trust: bool,
    /// Instead of client entries: a systemd user unit (Linux) or launchd agent (macOS) that
    /// keeps the HTTP endpoint (`cuba-exec serve --http`) running; --remove takes it out.
    #[arg(long, conflicts_with_all = ["clients", "codex_approve", "gemini_trust", "qwen_trust"])]
    http: bool,
    /// Instead of client entries: the sandbox preset in the settings file (writes in the
    /// workspace only, secrets masked, the network only to the package registries through the
    /// daemon's proxy, other hosts asked about); --remove takes it out.
    #[arg(long, conflicts_with_all = ["clients", "codex_approve", "gemini_trust", "qwen_trust", "http", "env", "bin_dir"])]
    sandbox: bool,
}

/// `KEY=VALUE`, KEY a portable environment variable name.
fn parse_env(s: &str) -> Result<(String, String), String> {
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))?;
    let mut chars = key.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "{key:?} is not an environment variable name (letters, digits and _, not starting \
             with a digit)"
        ));
    }
    Ok((key.to_string(), value.to_string()))
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.sandbox {
        let file = sandbox::settings_file()?;
        return sandbox::run(&file, args.remove, args.dry_run);
    }
    let dirs = Dirs::from_env()?;
    if args.http {
        let exe = match args.remove {
            true => None,
            false => Some(cuba_exec(args.bin_dir.as_deref())?),
        };
        return service::run(&dirs, exe.as_deref(), &args.env, args.dry_run);
    }
    // Before discovery's report: without the server there is nothing to set up.
    let server = match args.remove {
        true => None,
        false => Some(Server {
            command: cuba_exec(args.bin_dir.as_deref())?,
            env: args.env.into_iter().collect(),
        }),
    };
    let named = !args.clients.is_empty();
    let mut chosen = args.clients;
    chosen.sort();
    chosen.dedup();
    if !named {
        chosen = discover(&dirs)?;
    }
    let plan = Plan {
        dirs: &dirs,
        server: server.as_ref(),
        opts: Options {
            codex_approve: args.codex_approve,
            gemini_trust: args.gemini_trust,
            qwen_trust: args.qwen_trust,
        },
        dry_run: args.dry_run,
    };
    let results: Vec<(Client, String, Result<Outcome>)> = chosen
        .into_iter()
        .map(|c| (c, dirs.show(&c.config_file(&dirs)), apply::apply(c, &plan)))
        .collect();
    let failed = print(&results, named)?;
    let changed = results.iter().any(|(_, _, r)| {
        matches!(r, Ok(o) if matches!(o.status, Status::Written | Status::Updated | Status::Removed))
    });
    if changed {
        outln!("\nRestart those clients (or reload their MCP servers) to pick up the change.")?;
    }
    // After a real write (or a file already right), what shows each client runs the server.
    let set_up: Vec<Client> = results
        .iter()
        .filter(|(_, _, r)| {
            matches!(r, Ok(o) if matches!(o.status, Status::Written | Status::Updated | Status::Unchanged))
        })
        .map(|(c, _, _)| *c)
        .collect();
    if !set_up.is_empty() && plan.server.is_some() && !plan.dry_run {
        outln!("\nTo see that it works:")?;
        for client in set_up {
            outln!("  {:<15} {}", client.name(), client.proof())?;
        }
    }
    Ok(if failed {
        exit::failed()
    } else {
        ExitCode::SUCCESS
    })
}

/// Every client found on this machine, after a line for each saying whether it was and why.
fn discover(dirs: &Dirs) -> Result<Vec<Client>> {
    let mut found = Vec::new();
    for client in clients::ALL {
        let f = client.find(dirs);
        let word = if f.found { "found" } else { "not found" };
        outln!("{word:<10} {:<15} {}", client.name(), f.why)?;
        if f.found {
            found.push(client);
        }
    }
    outln!()?;
    if found.is_empty() {
        bail!("no coding client found on this machine; name one with --client NAME");
    }
    Ok(found)
}

/// The absolute path of cuba-exec in `bin_dir`, by default the directory of this cubactl.
fn cuba_exec(bin_dir: Option<&Path>) -> Result<String> {
    let dir = match bin_dir {
        Some(dir) => dir
            .canonicalize()
            .with_context(|| format!("--bin-dir {}", dir.display()))?,
        None => std::env::current_exe()
            .and_then(|exe| exe.canonicalize())
            .context("cannot tell where this cubactl is; pass --bin-dir DIR")?
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| anyhow!("cannot tell where this cubactl is; pass --bin-dir DIR"))?,
    };
    if let Some(why) = passing(&dir) {
        eprintln!(
            "cubactl: note: {} is {why}; every client set up here would lose its server. \
             Install the programs where they stay (docs/install.md) and run that cubactl's setup",
            dir.display()
        );
    }
    let exe = plain(dir).join(format!("cuba-exec{}", std::env::consts::EXE_SUFFIX));
    if !exe.is_file() {
        bail!(
            "{} does not exist: the MCP server must be there (build it with `cargo build \
             --release -p cuba-exec`), or pass --bin-dir DIR",
            exe.display()
        );
    }
    exe.into_os_string().into_string().map_err(|p| {
        anyhow!(
            "{} is not UTF-8, so no client's config can name it",
            Path::new(&p).display()
        )
    })
}

/// Why `dir` may vanish under the clients configured to run from it: a build directory (Cargo
/// marks its target directory with `CACHEDIR.TAG`, as uv marks its cache, where `uvx` unpacks a
/// wheel) or npx's cache of packages it ran (`…/_npx/…`).
fn passing(dir: &Path) -> Option<&'static str> {
    if dir.components().any(|c| c.as_os_str() == "_npx") {
        return Some("npx's cache, which `npm cache clean` and npm itself empty");
    }
    dir.ancestors()
        .any(|a| a.join("CACHEDIR.TAG").is_file())
        .then_some("a build or cache directory (it holds a CACHEDIR.TAG), which is emptied at will")
}

/// Windows: `path` without the `\\?\` that `canonicalize` puts before a drive letter, as people
/// and clients' configs write paths.
#[cfg(windows)]
fn plain(path: PathBuf) -> PathBuf {
    match path.to_str().and_then(|s| s.strip_prefix(r"\\?\")) {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => PathBuf::from(rest),
        _ => path,
    }
}

#[cfg(unix)]
fn plain(path: PathBuf) -> PathBuf {
    path
}

/// One line per client, then its details and notes; errors to stderr. True if any failed.
fn print(results: &[(Client, String, Result<Outcome>)], named: bool) -> Result<bool> {
    let width = results
        .iter()
        .map(|(_, p, _)| p.chars().count())
        .max()
        .unwrap_or(0);
    let mut failed = false;
    for (client, shown, result) in results {
        let name = client.name();
        let outcome = match result {
            Ok(o) => o,
            Err(e) => {
                failed = true;
                outln!("{name:<15} {shown:<width$}  failed")?;
                eprintln!("cubactl setup: {name}: {e:#}");
                continue;
            }
        };
        // Only what was asked for by name has to be done; a found client left to the user
        // is reported, not failed.
        failed |= named && outcome.status == Status::Manual;
        outln!("{name:<15} {shown:<width$}  {}", outcome.status.word())?;
        for line in outcome.details.iter().flat_map(|d| d.lines()) {
            match line.is_empty() {
                true => outln!()?,
                false => outln!("    {line}")?,
            }
        }
        for note in &outcome.notes {
            outln!("    note: {note}")?;
        }
    }
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::parse_env;

    #[test]
    fn env_names() {
        assert_eq!(parse_env("A_1=x=y"), Ok(("A_1".into(), "x=y".into())));
        assert_eq!(parse_env("_A="), Ok(("_A".into(), String::new())));
        assert!(parse_env("1A=x").is_err());
        assert!(parse_env("A-B=x").is_err());
        assert!(parse_env("=x").is_err());
        assert!(parse_env("AB").is_err());
    }
}
