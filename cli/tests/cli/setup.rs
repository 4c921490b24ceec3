//! `cubactl setup` end to end: the real binary, each test with its own temp HOME (and
//! XDG_CONFIG_HOME, CODEX_HOME inside it) and a PATH holding no client, checking the files it
//! writes byte for byte where the format allows. This file: the formats; `setup/behaviour.rs`:
//! what happens across runs and on bad input.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use tempfile::TempDir;

#[path = "setup/behaviour.rs"]
mod behaviour;

const CLAUDE: &str = ".claude.json";
const CURSOR: &str = ".cursor/mcp.json";
const CODEX: &str = ".codex/config.toml";
const ZED: &str = ".config/zed/settings.json";

struct Home {
    _dir: TempDir,
    root: PathBuf,
}

struct Run {
    code: i32,
    out: String,
    err: String,
}

impl Home {
    /// A temp dir with `home/`, `path/` (PATH: empty), and `bin/`, `bin2/` each holding a
    /// stand-in cuba-exec.
    fn new() -> Home {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        for d in ["home", "path", "bin", "bin2"] {
            fs::create_dir(root.join(d)).expect("mkdir");
        }
        let home = Home { _dir: dir, root };
        for bin in ["bin", "bin2"] {
            home.executable(&home.root.join(bin).join("cuba-exec"));
        }
        home
    }

    fn executable(&self, path: &Path) {
        fs::write(path, "#!/bin/sh\n").expect("write stand-in");
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn exe(&self, bin: &str) -> String {
        format!("{}/{bin}/cuba-exec", self.root.display())
    }

    /// `cubactl setup --bin-dir ROOT/bin ARGS`.
    fn setup(&self, args: &[&str]) -> Run {
        self.setup_with(&self.root.join("bin"), args)
    }

    fn setup_with(&self, bin_dir: &Path, args: &[&str]) -> Run {
        let home = self.home();
        let out = Command::new(env!("CARGO_BIN_EXE_cubactl"))
            .arg("setup")
            .arg("--bin-dir")
            .arg(bin_dir)
            .args(args)
            .env_clear()
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("CODEX_HOME", home.join(".codex"))
            .env("PATH", self.root.join("path"))
            .output()
            .expect("run cubactl");
        Run {
            code: out.status.code().unwrap_or(-1),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.home().join(rel)
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    fn json(&self, rel: &str) -> Value {
        serde_json::from_str(&self.read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    }

    fn mode(&self, rel: &str) -> u32 {
        fs::metadata(self.path(rel))
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    }

    /// The backups next to `rel`, sorted.
    fn backups(&self, rel: &str) -> Vec<PathBuf> {
        let path = self.path(rel);
        let name = path
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let Ok(entries) = fs::read_dir(path.parent().expect("has a parent")) else {
            return Vec::new();
        };
        let mut found: Vec<PathBuf> = entries
            .map(|e| e.expect("dir entry").path())
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    n.to_string_lossy()
                        .starts_with(&format!("{name}.bak-cubactl"))
                })
            })
            .collect();
        found.sort();
        found
    }
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn assert_ok(run: &Run) {
    assert_eq!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.out, run.err);
}

#[test]
fn every_client_from_nothing() {
    let desktop = match cfg!(target_os = "macos") {
        true => "Library/Application Support/Claude/claude_desktop_config.json",
        false => ".config/Claude/claude_desktop_config.json",
    };
    let vscode = match cfg!(target_os = "macos") {
        true => "Library/Application Support/Code/User/mcp.json",
        false => ".config/Code/User/mcp.json",
    };
    let h = Home::new();
    let exe = h.exe("bin");
    let plain = json!({"command": exe, "args": [], "env": {"A": "1"}});
    let typed = json!({"type": "stdio", "command": exe, "args": [], "env": {"A": "1"}});
    let cases = [
        (
            "claude-code",
            CLAUDE,
            json!({"mcpServers": {"cuba-exec": typed}}),
        ),
        (
            "claude-desktop",
            desktop,
            json!({"mcpServers": {"cuba-exec": plain}}),
        ),
        (
            "cursor",
            CURSOR,
            json!({"mcpServers": {"cuba-exec": plain}}),
        ),
        ("vscode", vscode, json!({"servers": {"cuba-exec": typed}})),
        (
            "gemini",
            ".gemini/settings.json",
            json!({"mcpServers": {"cuba-exec": plain}}),
        ),
        (
            "opencode",
            ".config/opencode/opencode.json",
            json!({"$schema": "https://opencode.ai/config.json", "mcp": {"cuba-exec": {
                "type": "local", "command": [exe], "environment": {"A": "1"}, "enabled": true}}}),
        ),
        (
            "windsurf",
            ".codeium/windsurf/mcp_config.json",
            json!({"mcpServers": {"cuba-exec": plain}}),
        ),
        ("zed", ZED, json!({"context_servers": {"cuba-exec": plain}})),
        (
            "copilot",
            ".copilot/mcp-config.json",
            json!({"mcpServers": {"cuba-exec": {
                "type": "local", "command": exe, "args": [], "env": {"A": "1"}, "tools": ["*"]}}}),
        ),
        (
            "kilo",
            ".config/kilo/kilo.json",
            json!({"$schema": "https://app.kilo.ai/config.json", "mcp": {"cuba-exec": {
                "type": "local", "command": [exe], "environment": {"A": "1"}, "enabled": true}}}),
        ),
        (
            "qwen",
            ".qwen/settings.json",
            json!({"mcpServers": {"cuba-exec": plain}}),
        ),
        (
            "cline",
            ".cline/data/settings/cline_mcp_settings.json",
            json!({"mcpServers": {"cuba-exec": {"transport": typed}}}),
        ),
    ];
    for (client, rel, want) in &cases {
        let run = h.setup(&["--client", client, "--env", "A=1"]);
        assert_ok(&run);
        assert!(run.out.contains("written"), "{client}: {}", run.out);
        assert_eq!(&h.json(rel), want, "{client}");
        assert_eq!(h.mode(rel), 0o600, "{client}: a new file is private");
    }
    // Key order as the clients' own tools write it.
    assert_eq!(
        h.read(CLAUDE),
        format!(
            "{{\n  \"mcpServers\": {{\n    \"cuba-exec\": {{\n      \"type\": \"stdio\",\n      \
             \"command\": \"{exe}\",\n      \"args\": [],\n      \"env\": {{\n        \"A\": \"1\"\n      \
             }}\n    }}\n  }}\n}}\n"
        )
    );
}

#[test]
fn codex_from_nothing() {
    let h = Home::new();
    let exe = h.exe("bin");
    assert_ok(&h.setup(&["--client", "codex", "--env", "A=1"]));
    assert_eq!(
        h.read(CODEX),
        format!("[mcp_servers.cuba-exec]\ncommand = \"{exe}\"\nargs = []\n\n[mcp_servers.cuba-exec.env]\nA = \"1\"\n")
    );
    assert_eq!(h.mode(CODEX), 0o600);
}

const CLAUDE_BEFORE: &str = r#"{
  "numStartups": 34,
  "theme": "dark",
  "ratio": 1.50,
  "big": 1e3,
  "name": "caf\u00e9",
  "projects": {
    "/home/me/src": {
      "allowedTools": [],
      "mcpServers": {}
    }
  },
  "mcpServers": {
    "other": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "other"]
    }
  },
  "autoUpdates": true
}
"#;

#[test]
fn claude_json_keeps_everything_else_exactly() {
    let h = Home::new();
    h.write(CLAUDE, CLAUDE_BEFORE);
    assert_ok(&h.setup(&["--client", "claude-code"]));
    let ours = format!(
        ",\n    \"cuba-exec\": {{\n      \"type\": \"stdio\",\n      \"command\": \"{}\",\n      \
         \"args\": [],\n      \"env\": {{}}\n    }}\n  }},\n  \"autoUpdates\"",
        h.exe("bin")
    );
    let want = CLAUDE_BEFORE.replace("\n  },\n  \"autoUpdates\"", &ours);
    assert_eq!(h.read(CLAUDE), want);
    let backups = h.backups(CLAUDE);
    assert_eq!(backups.len(), 1);
    assert_eq!(
        fs::read_to_string(&backups[0]).expect("backup"),
        CLAUDE_BEFORE
    );

    // Taking it out gives back the original, byte for byte.
    let run = h.setup(&["--client", "claude-code", "--remove"]);
    assert_ok(&run);
    assert!(run.out.contains("removed"), "{}", run.out);
    assert_eq!(h.read(CLAUDE), CLAUDE_BEFORE);
}

const CODEX_BEFORE: &str = r#"# my codex config
model = "o3"  # the default

[mcp_servers.other]
command = "other"   # theirs
args = ["--x"]

# profiles below
[profiles.fast]
model = "o4-mini"
"#;

#[test]
fn codex_keeps_comments_and_other_tables() {
    let h = Home::new();
    h.write(CODEX, CODEX_BEFORE);
    assert_ok(&h.setup(&["--client", "codex"]));
    let ours = format!(
        "args = [\"--x\"]\n\n[mcp_servers.cuba-exec]\ncommand = \"{}\"\nargs = []\n\n\
         [mcp_servers.cuba-exec.env]\n\n# profiles below",
        h.exe("bin")
    );
    let want = CODEX_BEFORE.replace("args = [\"--x\"]\n\n# profiles below", &ours);
    assert_eq!(h.read(CODEX), want);

    let run = h.setup(&["--client", "codex", "--remove"]);
    assert_ok(&run);
    assert_eq!(h.read(CODEX), CODEX_BEFORE);
}

#[test]
fn zed_settings_with_comments_are_not_rewritten() {
    let h = Home::new();
    let jsonc = "// Zed settings\n{\n  \"theme\": \"One Dark\",\n}\n";
    h.write(ZED, jsonc);
    // Asked for by name: not done, so exit 1, with the entry to paste.
    let run = h.setup(&["--client", "zed"]);
    assert_eq!(run.code, 1, "{}", run.out);
    assert!(
        run.out.contains("not written: edit it by hand"),
        "{}",
        run.out
    );
    assert!(run.out.contains("\"cuba-exec\": {"), "{}", run.out);
    assert!(run.out.contains(&h.exe("bin")), "{}", run.out);
    assert_eq!(h.read(ZED), jsonc);
    assert!(h.backups(ZED).is_empty());
    // Found, not named: reported, not a failure.
    let run = h.setup(&[]);
    assert_eq!(run.code, 0, "{}", run.out);
    // Already pasted: unchanged.
    let pasted = format!(
        "// Zed settings\n{{\n  \"context_servers\": {{\n    // ours\n    \"cuba-exec\": {{\"command\": \"{}\", \"args\": [], \"env\": {{}},}},\n  }},\n}}\n",
        h.exe("bin")
    );
    h.write(ZED, &pasted);
    let run = h.setup(&["--client", "zed"]);
    assert_ok(&run);
    assert!(run.out.contains("unchanged"), "{}", run.out);
}

#[test]
fn codex_approval_only_with_its_flag() {
    let h = Home::new();
    let run = h.setup(&["--client", "codex"]);
    assert_ok(&run);
    assert!(!h.read(CODEX).contains("approval"), "{}", h.read(CODEX));
    assert!(
        run.out.contains("--codex-approve"),
        "the note says how: {}",
        run.out
    );
    assert!(run.out.contains("send_signal"), "{}", run.out);

    let run = h.setup(&["--client", "codex", "--codex-approve"]);
    assert_ok(&run);
    assert!(run.out.contains("updated"), "{}", run.out);
    assert_eq!(
        h.read(CODEX),
        format!(
            "[mcp_servers.cuba-exec]\ncommand = \"{}\"\nargs = []\ndefault_tools_approval_mode = \"approve\"\n\n[mcp_servers.cuba-exec.env]\n",
            h.exe("bin")
        )
    );
}

#[test]
fn qwen_trust_only_with_its_flag() {
    let h = Home::new();
    let run = h.setup(&["--client", "qwen"]);
    assert_ok(&run);
    assert!(h.json(".qwen/settings.json")["mcpServers"]["cuba-exec"]
        .get("trust")
        .is_none());
    assert!(run.out.contains("--qwen-trust"), "{}", run.out);
    assert_ok(&h.setup(&["--client", "qwen", "--qwen-trust"]));
    assert_eq!(
        h.json(".qwen/settings.json")["mcpServers"]["cuba-exec"]["trust"],
        true
    );
}

#[test]
fn gemini_trust_only_with_its_flag() {
    let h = Home::new();
    let run = h.setup(&["--client", "gemini"]);
    assert_ok(&run);
    assert!(h.json(".gemini/settings.json")["mcpServers"]["cuba-exec"]
        .get("trust")
        .is_none());
    assert!(run.out.contains("--gemini-trust"), "{}", run.out);
    assert_ok(&h.setup(&["--client", "gemini", "--gemini-trust"]));
    assert_eq!(
        h.json(".gemini/settings.json")["mcpServers"]["cuba-exec"]["trust"],
        true
    );
}
