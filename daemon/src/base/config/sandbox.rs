//! The OS sandbox settings (`sandbox`, `network`, `deny_read`, `unix_sockets`, `[proxy]`, the
//! daemon's `TMPDIR`). How a command enters it is the platform's (`platform::sandbox`).

use std::path::{Path, PathBuf};

/// Character devices (and the pty directory) a shell writes to, and `/dev/shm` (a temp dir
/// for POSIX shared memory: Python's multiprocessing pools need it); everything else in
/// `/dev` stays read-only.
const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/pts",
    "/dev/shm",
];

/// What a sandboxed command may not read by default, under the home directory: credentials of
/// ssh, gpg, the clouds, the package registries and forges, and the shells' and tools'
/// histories. cuba-exec's own settings, state and token files are added where they are.
pub const DEFAULT_MASKS: [&str; 38] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pypirc",
    ".config/pip/pip.conf",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".pgpass",
    ".my.cnf",
    ".password-store",
    ".local/share/keyrings",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
];

/// `network = "proxy"`: the rules of the daemon's proxy, as the settings spell them (checked
/// when the settings are read, see `parts::net_proxy::rules`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProxyRules {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub read_only: Vec<String>,
    /// What a host no rule names gets: `deny` (the default), `ask` or `allow`.
    pub unknown: String,
}

/// The sandbox settings of a daemon.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sandbox {
    /// `sandbox = "workspace-write"` (`CUBA_EXEC_SANDBOX`): Landlock write confinement.
    pub workspace_write: bool,
    /// `network = false` (`CUBA_EXEC_NETWORK=0`): a new network namespace per command.
    pub no_network: bool,
    /// `network = "proxy"` (`CUBA_EXEC_NETWORK=proxy`): a new network namespace whose only
    /// way out is the daemon's proxy, with these rules. `no_network` wins over it.
    #[serde(default)]
    pub proxy: Option<ProxyRules>,
    /// The daemon's own `$TMPDIR` (never a client's: that would let a client pick a writable
    /// directory).
    pub tmpdir: Option<PathBuf>,
    /// Masks are on: `sandbox = "workspace-write"`, or a `deny_read` list of the person's.
    #[serde(default)]
    pub masked: bool,
    /// What a command may not read when masks are on (absolute paths): the defaults (unless
    /// `deny_read_defaults = false`) and the person's `deny_read`.
    #[serde(default)]
    pub deny_read: Vec<PathBuf>,
    /// Unix sockets a sandboxed command may connect to outside its allowed directories
    /// (`unix_sockets`).
    #[serde(default)]
    pub unix_sockets: Vec<PathBuf>,
}

impl Sandbox {
    pub fn active(&self) -> bool {
        self.workspace_write || self.no_network || self.proxy.is_some() || self.masked
    }

    /// The proxy's rules when the command's way out is the proxy (not with no network).
    pub fn proxied(&self) -> Option<&ProxyRules> {
        self.proxy.as_ref().filter(|_| !self.no_network)
    }

    /// The settings in force, as the settings file spells them, for a message.
    pub fn described(&self) -> String {
        let mut parts = Vec::new();
        if self.workspace_write {
            parts.push("sandbox = \"workspace-write\"".to_string());
        }
        if self.no_network {
            parts.push("network = false".to_string());
        } else if self.proxy.is_some() {
            parts.push("network = \"proxy\"".to_string());
        }
        if self.masked && !self.workspace_write {
            parts.push("deny_read".to_string());
        }
        parts.join(" and ")
    }

    /// What a command started now is held to, one line per part (`daemon status`, `policy
    /// check`); `roots` are the allowed directories.
    pub fn lines(&self, roots: &[PathBuf]) -> Vec<String> {
        if !self.active() {
            return vec!["off: commands run with the user's full rights".into()];
        }
        let shown = |p: &[PathBuf]| -> String {
            let v: Vec<String> = p.iter().map(|p| p.display().to_string()).collect();
            v.join(", ")
        };
        let mut lines = Vec::new();
        lines.push(match (self.workspace_write, roots.is_empty()) {
            (true, false) => format!("writes: only under {} and the temp dirs", shown(roots)),
            (true, true) => "writes: only under the command's cwd and the temp dirs".into(),
            (false, _) => "writes: not confined".into(),
        });
        let masks = self.masks();
        let (here, absent): (Vec<&PathBuf>, Vec<&PathBuf>) =
            masks.iter().partition(|m| m.symlink_metadata().is_ok());
        lines.push(match (masks.is_empty(), here.is_empty()) {
            (true, _) => "reads: not confined".into(),
            (false, true) => format!(
                "reads: {} masks, none of which exists now (each is masked once it does)",
                absent.len()
            ),
            (false, false) => {
                let names: Vec<String> = here.iter().map(|p| p.display().to_string()).collect();
                format!(
                    "reads: everything but {} masks: {}{}",
                    here.len(),
                    names.join(", "),
                    match absent.len() {
                        0 => String::new(),
                        n => format!(" (and {n} more once they exist)"),
                    }
                )
            }
        });
        lines.push(match (self.no_network, &self.proxy) {
            (true, _) => "network: none (a network namespace of its own)".into(),
            (false, Some(r)) => {
                let mut rules = Vec::new();
                for (word, list) in [("allow", &r.allow), ("deny", &r.deny)] {
                    if !list.is_empty() {
                        rules.push(format!("{word} {}", list.join(", ")));
                    }
                }
                if !r.read_only.is_empty() {
                    rules.push(format!("read-only {}", r.read_only.join(", ")));
                }
                let unknown = if r.unknown.is_empty() {
                    "deny"
                } else {
                    &r.unknown
                };
                rules.push(format!("other hosts: {unknown}"));
                format!(
                    "network: only through the daemon's proxy: {}",
                    rules.join("; ")
                )
            }
            (false, None) => "network: not confined".into(),
        });
        let listed = match self.unix_sockets.is_empty() {
            true => String::new(),
            false => format!(", and {}", shown(&self.unix_sockets)),
        };
        lines.push(format!(
            "unix sockets: only under the allowed directories and those the command made{listed}"
        ));
        lines.push("signals: only within the command's own tree".into());
        lines
    }

    /// What a command may not read (nothing when masks are off).
    pub fn masks(&self) -> &[PathBuf] {
        if self.masked {
            &self.deny_read
        } else {
            &[]
        }
    }

    /// What a command may write under: `roots` (or `cwd` when there are none), the temp dirs
    /// and the devices.
    pub fn writable(&self, roots: &[PathBuf], cwd: &Path) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = if roots.is_empty() {
            vec![cwd.to_path_buf()]
        } else {
            roots.to_vec()
        };
        paths.push(PathBuf::from("/tmp"));
        paths.extend(self.tmpdir.iter().cloned());
        paths.extend(DEVICES.iter().map(PathBuf::from));
        paths
    }

    /// Sets the masks: `listed` (the person's, `~/` meaning `home`), the defaults under
    /// `home` unless `defaults` is false, and cuba-exec's `own` files and directories. Masks
    /// are on with `workspace-write` or a list of the person's.
    pub fn set_masks(
        &mut self,
        listed: &[String],
        defaults: bool,
        home: Option<&Path>,
        own: &[PathBuf],
    ) -> Result<(), String> {
        let mut masks = Vec::new();
        for entry in listed.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            let path = match (entry.strip_prefix("~/"), home) {
                (Some(rest), Some(home)) => home.join(rest),
                (Some(_), None) => return Err(format!("{entry:?}: no home directory for `~/`")),
                (None, _) => PathBuf::from(entry),
            };
            if !path.is_absolute() {
                return Err(format!(
                    "{entry:?}: expected an absolute path or one under `~/`"
                ));
            }
            masks.push(path);
        }
        if defaults {
            if let Some(home) = home {
                masks.extend(DEFAULT_MASKS.iter().map(|m| home.join(m)));
            }
            masks.extend(own.iter().cloned());
        }
        masks.sort();
        masks.dedup();
        self.masked = self.workspace_write || !listed.is_empty();
        self.deny_read = masks;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn masks_come_with_workspace_write_or_a_list_of_ones_own() {
        let home = Path::new("/home/u");
        let own = [PathBuf::from("/home/u/.local/state/cuba-exec")];
        let mut s = Sandbox::default();
        s.set_masks(&[], true, Some(home), &own).unwrap();
        assert!(s.masks().is_empty(), "off without a sandbox or a list");
        s.workspace_write = true;
        s.set_masks(&[], true, Some(home), &own).unwrap();
        assert!(s.masks().contains(&PathBuf::from("/home/u/.ssh")));
        assert!(s.masks().contains(&own[0]));
        let mut s = Sandbox::default();
        s.set_masks(
            &["~/work/.env".into(), "/srv/keys".into()],
            false,
            Some(home),
            &own,
        )
        .unwrap();
        assert_eq!(
            s.masks(),
            [
                PathBuf::from("/home/u/work/.env"),
                PathBuf::from("/srv/keys")
            ]
        );
        assert!(s
            .set_masks(&["rel/path".into()], true, Some(home), &own)
            .is_err());
    }
}
