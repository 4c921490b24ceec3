//! Where the clients keep their files, read from the environment once (tests point it at a
//! temp HOME), and how a program is found on PATH.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// Where the clients' files are, from the environment (read once; tests point it at a temp HOME).
#[derive(Debug)]
pub struct Dirs {
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub config: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex_home: PathBuf,
    /// `$COPILOT_HOME`, else `~/.copilot`.
    pub copilot_home: PathBuf,
    /// `$QWEN_HOME`, else `~/.qwen`.
    pub qwen_home: PathBuf,
    /// Cline's MCP settings file: `$CLINE_MCP_SETTINGS_PATH`, else `settings/` under
    /// `$CLINE_DATA_DIR`, else under `$CLINE_DIR/data` (`~/.cline/data`).
    pub cline_settings: PathBuf,
    /// `$CLINE_DIR`, else `~/.cline`: there once Cline has run.
    pub cline_dir: PathBuf,
    /// `%APPDATA%` (Windows), where Electron apps keep their data.
    #[cfg(windows)]
    appdata: Option<PathBuf>,
    path: Option<OsString>,
}

impl Dirs {
    pub fn from_env() -> Result<Dirs> {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        // The home the clients use: on Windows USERPROFILE (what Node's `os.homedir()` and
        // Rust's `home_dir()` read there), HOME only without it.
        let home = match cfg!(windows) {
            true => var("USERPROFILE").or_else(|| var("HOME")),
            false => var("HOME"),
        };
        let home = match home {
            Some(h) => h,
            None if cfg!(windows) => bail!(
                "neither USERPROFILE nor HOME is set: cannot tell where the clients keep their \
                 configuration"
            ),
            None => {
                bail!("HOME is not set: cannot tell where the clients keep their configuration")
            }
        };
        // The XDG spec says to ignore a relative XDG_CONFIG_HOME.
        let config = var("XDG_CONFIG_HOME")
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"));
        let codex_home = var("CODEX_HOME").unwrap_or_else(|| home.join(".codex"));
        let copilot_home = var("COPILOT_HOME").unwrap_or_else(|| home.join(".copilot"));
        let qwen_home = var("QWEN_HOME").unwrap_or_else(|| home.join(".qwen"));
        let cline_dir = var("CLINE_DIR").unwrap_or_else(|| home.join(".cline"));
        let cline_settings = var("CLINE_MCP_SETTINGS_PATH").unwrap_or_else(|| {
            var("CLINE_DATA_DIR")
                .unwrap_or_else(|| cline_dir.join("data"))
                .join("settings/cline_mcp_settings.json")
        });
        Ok(Dirs {
            home,
            config,
            codex_home,
            copilot_home,
            qwen_home,
            cline_settings,
            cline_dir,
            #[cfg(windows)]
            appdata: var("APPDATA"),
            path: std::env::var_os("PATH"),
        })
    }

    /// `path` with the home directory written `~`.
    pub fn show(&self, path: &Path) -> String {
        match path.strip_prefix(&self.home) {
            Ok(rest) if rest.as_os_str().is_empty() => "~".into(),
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => path.display().to_string(),
        }
    }

    /// The first executable file `name` in PATH.
    #[cfg(unix)]
    pub(super) fn on_path(&self, name: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path.as_ref()?;
        std::env::split_paths(path)
            .map(|dir| dir.join(name))
            .find(|p| {
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }

    /// The first program `name` in PATH, found as Windows finds programs: `name` with one of
    /// the extensions in PATHEXT (`claude.cmd`, `codex.exe`).
    #[cfg(windows)]
    pub(super) fn on_path(&self, name: &str) -> Option<PathBuf> {
        let path = self.path.as_ref()?;
        let exts = std::env::var("PATHEXT")
            .ok()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| ".COM;.EXE;.BAT;.CMD".into());
        std::env::split_paths(path).find_map(|dir| {
            exts.split(';')
                .filter(|e| !e.is_empty())
                .map(|ext| dir.join(format!("{name}{ext}")))
                .find(|p| p.is_file())
        })
    }

    /// Where Electron apps (Claude Desktop, VS Code) keep their data: their `appData` dir.
    pub(super) fn app_data(&self) -> PathBuf {
        #[cfg(windows)]
        if let Some(dir) = &self.appdata {
            return dir.clone();
        }
        if cfg!(target_os = "macos") {
            self.home.join("Library/Application Support")
        } else {
            self.config.clone()
        }
    }
}
