//! The coding clients `setup` knows: where each keeps its user-level MCP servers, the entry it
//! reads, how to tell it is on this machine, and the per-client extras hook.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Value};

pub use super::dirs::Dirs;

/// Our server's name in every client's configuration.
pub const SERVER: &str = "cuba-exec";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Client {
    ClaudeCode,
    ClaudeDesktop,
    Cursor,
    Vscode,
    Codex,
    Gemini,
    Opencode,
    Windsurf,
    Zed,
    Copilot,
    Kilo,
    Qwen,
    Cline,
}

pub const ALL: [Client; 13] = [
    Client::ClaudeCode,
    Client::ClaudeDesktop,
    Client::Cursor,
    Client::Vscode,
    Client::Codex,
    Client::Gemini,
    Client::Opencode,
    Client::Windsurf,
    Client::Zed,
    Client::Copilot,
    Client::Kilo,
    Client::Qwen,
    Client::Cline,
];

/// How a client's file is edited.
#[derive(Clone, Copy, Debug)]
pub enum Format {
    /// A JSON object with our entry at `container.cuba-exec`. `jsonc`: the client also accepts
    /// comments and trailing commas, which this editor could not keep, so such a file is read
    /// but never rewritten.
    Json {
        container: &'static str,
        jsonc: bool,
    },
    /// Codex's config.toml: `[mcp_servers.cuba-exec]`.
    CodexToml,
}

/// The command line the entry runs, the same for every client.
#[derive(Debug)]
pub struct Server {
    /// Absolute path of the cuba-exec binary.
    pub command: String,
    pub env: BTreeMap<String, String>,
}

/// The opt-in flags for settings that change what an agent may do without asking.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options {
    pub codex_approve: bool,
    pub gemini_trust: bool,
    pub qwen_trust: bool,
}

/// A value for [`Extras::settings`]: scalars only, so every format can hold it.
#[derive(Debug, Clone)]
pub enum Setting {
    Str(&'static str),
    Bool(bool),
}

/// What one client needs beyond command, args and env, and what to tell the user about it.
#[derive(Debug, Default)]
pub struct Extras {
    /// Keys added to our entry (`[mcp_servers.cuba-exec]` for Codex), in this order.
    pub settings: Vec<(&'static str, Setting)>,
    pub notes: Vec<String>,
}

/// The hook for per-client extra settings and notes. A setting that lets an agent act without
/// a person's approval is written only with its explicit flag, never silently; without the flag
/// a note says what the client will refuse or ask, and how to allow it. `file`: the config file
/// as shown to the user.
pub fn extras(client: Client, opts: Options, file: &str) -> Extras {
    let mut x = Extras::default();
    match client {
        Client::Codex if opts.codex_approve => {
            // Codex 0.169's key (docs/clients.md): per server, every tool.
            x.settings
                .push(("default_tools_approval_mode", Setting::Str("approve")));
            x.notes.push(
                "wrote default_tools_approval_mode = \"approve\": Codex calls every cuba-exec \
                 tool without asking, `codex exec` included"
                    .into(),
            );
        }
        Client::Codex => x.notes.push(format!(
            "`codex exec` refuses the tools cuba-exec marks destructive (run, start, \
             send_signal) unless [mcp_servers.{SERVER}] allows them: rerun with --codex-approve \
             to add default_tools_approval_mode = \"approve\" there, or add it to {file} yourself"
        )),
        Client::Gemini if opts.gemini_trust => {
            x.settings.push(("trust", Setting::Bool(true)));
            x.notes.push(
                "wrote \"trust\": true: Gemini CLI calls cuba-exec tools without confirmation \
                 (in folders it trusts)"
                    .into(),
            );
        }
        Client::Gemini => x.notes.push(
            "Gemini CLI asks before each cuba-exec tool call, and `gemini -p` (no one to ask) \
             offers the model none of them; --gemini-trust adds \"trust\": true to skip those \
             confirmations"
                .into(),
        ),
        Client::Qwen if opts.qwen_trust => {
            x.settings.push(("trust", Setting::Bool(true)));
            x.notes.push(
                "wrote \"trust\": true: Qwen Code calls cuba-exec tools without confirmation"
                    .into(),
            );
        }
        Client::Qwen => x.notes.push(
            "Qwen Code asks before each cuba-exec tool call, and a headless run has no one to \
             ask, so it refuses them; --qwen-trust adds \"trust\": true to skip those \
             confirmations"
                .into(),
        ),
        Client::Cline => x.notes.push(
            "Cline hands the model each result as JSON text and never shows it a server's \
             instructions (docs/clients.md)"
                .into(),
        ),
        Client::Copilot => x.notes.push(format!(
            "`copilot -p` refuses tools not allowed for the run: pass --allow-tool={SERVER}; it \
             hands the model our instructions only with --allow-all-mcp-server-instructions"
        )),
        Client::ClaudeCode => {
            x.notes.push(format!(
                "`claude -p` has no one to ask, so it refuses tools not allowed in advance: add \
                 \"mcp__{SERVER}\" to permissions.allow in ~/.claude/settings.json, or pass \
                 --allowedTools mcp__{SERVER}"
            ));
            if std::env::var_os("CLAUDE_CONFIG_DIR").is_some() {
                x.notes.push(
                    "CLAUDE_CONFIG_DIR is set: Claude Code may read \
                     $CLAUDE_CONFIG_DIR/.claude.json instead of this file"
                        .into(),
                );
            }
        }
        _ => {}
    }
    x
}

impl Setting {
    pub fn json(&self) -> Value {
        match self {
            Setting::Str(s) => Value::from(*s),
            Setting::Bool(b) => Value::from(*b),
        }
    }
}

/// Whether a client is on this machine, and what showed it (or what was looked for).
#[derive(Debug)]
pub struct Found {
    pub found: bool,
    pub why: String,
}

impl Client {
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::ClaudeDesktop => "claude-desktop",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Opencode => "opencode",
            Client::Windsurf => "windsurf",
            Client::Zed => "zed",
            Client::Copilot => "copilot",
            Client::Kilo => "kilo",
            Client::Qwen => "qwen",
            Client::Cline => "cline",
        }
    }

    /// The one thing to do that shows the client starts cuba-exec and sees its tools: a command
    /// of the client's own that connects to its servers where it has one (checked against the
    /// pinned clients), else where its UI shows them, else a request for the model.
    pub fn proof(self) -> &'static str {
        const ASK: &str = "ask it to \"run `echo cuba-exec works` with the cuba-exec run tool\"";
        match self {
            Client::ClaudeCode => "`claude mcp list` shows \"cuba-exec: … ✔ Connected\"",
            Client::ClaudeDesktop => "Settings → Developer lists cuba-exec as running",
            Client::Cursor => "Cursor Settings → MCP lists cuba-exec, enabled, with its tools",
            Client::Vscode => "Command Palette → \"MCP: List Servers\" shows cuba-exec running",
            // `codex mcp list` reads the file only; `/mcp` in a session lists the tools it got.
            Client::Codex => "type /mcp in a codex session: cuba-exec lists run, start, …",
            // In a folder Gemini CLI does not trust, user-level servers are shown disabled.
            Client::Gemini => {
                "`gemini mcp list` in a trusted folder shows \"cuba-exec … Connected\""
            }
            Client::Opencode => "`opencode mcp list` shows \"✓ cuba-exec connected\"",
            Client::Windsurf => "Windsurf Settings → Cascade → MCP servers lists cuba-exec's tools",
            Client::Zed => "the Agent panel's settings show cuba-exec with a green dot",
            // `copilot mcp list` and `cline config mcp` read the file only.
            Client::Copilot | Client::Cline => ASK,
            Client::Kilo => "`kilo mcp list` shows \"✓ cuba-exec connected\"",
            Client::Qwen => "`qwen mcp list` shows \"✓ cuba-exec … Connected\"",
        }
    }

    pub fn format(self) -> Format {
        let json = |container, jsonc| Format::Json { container, jsonc };
        match self {
            Client::Codex => Format::CodexToml,
            Client::Opencode | Client::Kilo => json("mcp", false),
            Client::Vscode => json("servers", true),
            Client::Zed => json("context_servers", true),
            _ => json("mcpServers", false),
        }
    }

    /// The user-level file holding the client's MCP servers.
    pub fn config_file(self, d: &Dirs) -> PathBuf {
        match self {
            Client::ClaudeCode => d.home.join(".claude.json"),
            Client::ClaudeDesktop => d.app_data().join("Claude/claude_desktop_config.json"),
            Client::Cursor => d.home.join(".cursor/mcp.json"),
            Client::Vscode => d.app_data().join("Code/User/mcp.json"),
            Client::Codex => d.codex_home.join("config.toml"),
            Client::Gemini => d.home.join(".gemini/settings.json"),
            Client::Opencode => d.config.join("opencode/opencode.json"),
            Client::Windsurf => d.home.join(".codeium/windsurf/mcp_config.json"),
            // Zed uses ~/.config/zed on macOS too.
            Client::Zed => d.config.join("zed/settings.json"),
            Client::Copilot => d.copilot_home.join("mcp-config.json"),
            Client::Kilo => d.config.join("kilo/kilo.json"),
            Client::Qwen => d.qwen_home.join("settings.json"),
            Client::Cline => d.cline_settings.clone(),
        }
    }

    /// Files and directories (`true`) whose presence shows the client has been used here.
    fn markers(self, d: &Dirs) -> Vec<(PathBuf, bool)> {
        let dir = |p: PathBuf| vec![(p, true)];
        match self {
            Client::ClaudeCode => vec![
                (d.home.join(".claude.json"), false),
                (d.home.join(".claude"), true),
            ],
            Client::ClaudeDesktop => dir(d.app_data().join("Claude")),
            Client::Cursor => dir(d.home.join(".cursor")),
            Client::Vscode => dir(d.app_data().join("Code")),
            Client::Codex => dir(d.codex_home.clone()),
            Client::Gemini => dir(d.home.join(".gemini")),
            Client::Opencode => dir(d.config.join("opencode")),
            Client::Windsurf => dir(d.home.join(".codeium/windsurf")),
            Client::Zed => dir(d.config.join("zed")),
            Client::Copilot => dir(d.copilot_home.clone()),
            Client::Kilo => dir(d.config.join("kilo")),
            Client::Qwen => dir(d.qwen_home.clone()),
            Client::Cline => dir(d.cline_dir.clone()),
        }
    }

    /// Its programs' names, as installed on PATH.
    fn programs(self) -> &'static [&'static str] {
        match self {
            Client::ClaudeCode => &["claude"],
            Client::ClaudeDesktop => &["claude-desktop"],
            Client::Cursor => &["cursor"],
            Client::Vscode => &["code"],
            Client::Codex => &["codex"],
            Client::Gemini => &["gemini"],
            Client::Opencode => &["opencode"],
            Client::Windsurf => &["windsurf"],
            // Some distributions name Zed's binary `zeditor`.
            Client::Zed => &["zed", "zeditor"],
            Client::Copilot => &["copilot"],
            Client::Kilo => &["kilo", "kilocode"],
            Client::Qwen => &["qwen"],
            Client::Cline => &["cline"],
        }
    }

    pub fn find(self, d: &Dirs) -> Found {
        let markers = self.markers(d);
        let shown: Vec<String> = markers
            .iter()
            .map(|(p, dir)| format!("{}{}", d.show(p), if *dir { "/" } else { "" }))
            .collect();
        let present = markers
            .iter()
            .position(|(p, dir)| if *dir { p.is_dir() } else { p.exists() });
        if let Some(i) = present {
            return Found {
                found: true,
                why: format!("{} exists", shown[i]),
            };
        }
        if let Some(p) = self.programs().iter().find(|p| d.on_path(p).is_some()) {
            return Found {
                found: true,
                why: format!("`{p}` is on PATH"),
            };
        }
        let programs: Vec<String> = self.programs().iter().map(|p| format!("`{p}`")).collect();
        Found {
            found: false,
            why: format!(
                "no {}, no {} on PATH",
                shown.join(" or "),
                programs.join(" or ")
            ),
        }
    }

    /// Keys a file this command creates starts with, before our entry.
    pub fn new_file_keys(self) -> Vec<(String, Value)> {
        match self {
            Client::Opencode => vec![("$schema".into(), json!("https://opencode.ai/config.json"))],
            Client::Kilo => vec![("$schema".into(), json!("https://app.kilo.ai/config.json"))],
            _ => Vec::new(),
        }
    }

    /// Our entry in this client's shape, keys in the order they are written.
    pub fn entry(self, server: &Server, extras: &Extras) -> Vec<(String, Value)> {
        let env: serde_json::Map<String, Value> = server
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect();
        let command = Value::from(server.command.as_str());
        let mut entry = match self {
            Client::Opencode | Client::Kilo => vec![
                ("type", json!("local")),
                ("command", json!([command])),
                ("environment", Value::Object(env)),
                ("enabled", json!(true)),
            ],
            // What `cline mcp add` writes: the command in a `transport`, the environment too.
            Client::Cline => vec![(
                "transport",
                json!({"type": "stdio", "command": command, "args": [], "env": env}),
            )],
            Client::ClaudeCode | Client::Vscode => vec![
                ("type", json!("stdio")),
                ("command", command),
                ("args", json!([])),
                ("env", Value::Object(env)),
            ],
            // What `copilot mcp add` writes; "tools": every tool of the server is offered.
            Client::Copilot => vec![
                ("type", json!("local")),
                ("command", command),
                ("args", json!([])),
                ("env", Value::Object(env)),
                ("tools", json!(["*"])),
            ],
            _ => vec![
                ("command", command),
                ("args", json!([])),
                ("env", Value::Object(env)),
            ],
        };
        entry.extend(extras.settings.iter().map(|(k, s)| (*k, s.json())));
        entry.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}
