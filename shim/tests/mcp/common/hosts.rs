//! A world of hosts for the MCP host tests: this machine's daemon (auto-started by the shim),
//! a "remote" daemon of its own (socket, state dir, environment) reached through a real `sshd`
//! on 127.0.0.1, and a config file naming them. The remote daemon is a second daemon on this
//! machine: what reaches it goes through `ssh` and `cubactl bridge` exactly as to another one.

use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

use cuba_tests::procfs;
use cuba_tests::sshd::SshServer;

use super::mcp::{self, Mcp};
use super::{shim_bin, TestDir};

/// A variable only the remote daemon's environment has.
pub const REMOTE_MARK: (&str, &str) = ("CUBA_TEST_REMOTE_MARK", "remote-side");
/// A secret of the remote environment: its value must never reach the model.
pub const REMOTE_SECRET: (&str, &str) = ("REMOTE_API_TOKEN", "remote-secret-4242");
/// A variable only the shim's (the laptop's) environment has.
pub const LAPTOP_MARK: (&str, &str) = ("CUBA_TEST_LAPTOP", "laptop-only");

pub struct Hosts {
    /// Declared first, dropped first: the shim and this machine's daemon go before the rest.
    pub local: TestDir,
    pub remote: TestDir,
    pub sshd: SshServer,
    /// The host `box`'s `cwd` on the remote side.
    pub work: PathBuf,
    config: String,
}

/// `cubactl`, built beside the shim.
pub fn cubactl_bin() -> PathBuf {
    shim_bin()
        .parent()
        .expect("the shim binary lives in target/<profile>")
        .join("cubactl")
}

fn quoted(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", items.join(", "))
}

impl Hosts {
    /// `box`: the remote daemon over ssh, with a `cwd`; `down`: ssh to a closed port.
    pub async fn new() -> Hosts {
        let remote = TestDir::with_daemon_env(&[REMOTE_MARK, REMOTE_SECRET]).await;
        let sshd = SshServer::start();
        sshd.add_daemon_host("box", &remote);
        sshd.add_unreachable_host("down");
        let work = remote.path().join("work");
        fs::create_dir_all(&work).expect("the remote work dir");
        let mut h = Hosts {
            local: TestDir::new(),
            remote,
            sshd,
            work,
            config: String::new(),
        };
        let cwd = h.work.display().to_string();
        h.ssh_host("box", Some(&cwd), None);
        h.ssh_host("down", None, None);
        h
    }

    /// Adds `[hosts.NAME]` reached as ssh alias `alias` of the test's ssh config.
    pub fn ssh_host(&mut self, name: &str, cwd: Option<&str>, remote_bin: Option<&str>) {
        let cubactl = cubactl_bin().display().to_string();
        let options = quoted(&["-F".into(), self.sshd.config_path().display().to_string()]);
        let _ = write!(
            self.config,
            "\n[hosts.{name}]\nssh = {name:?}\nssh_options = {options}\nremote_bin = {:?}\n",
            remote_bin.unwrap_or(&cubactl)
        );
        if let Some(cwd) = cwd {
            let _ = writeln!(self.config, "cwd = {cwd:?}");
        }
    }

    /// Adds `[hosts.NAME]` with `command` as its bridge.
    pub fn command_host(&mut self, name: &str, command: &[String]) {
        let _ = write!(
            self.config,
            "\n[hosts.{name}]\ncommand = {}\n",
            quoted(command)
        );
    }

    /// The shim binary with this world's config, as MCP client `name`, with `set` on top.
    pub async fn shim(&mut self, name: &str, set: &[(&str, &str)]) -> Mcp {
        let path = self.local.path().join("config.toml");
        fs::write(&path, &self.config).expect("the config file");
        let path = path.display().to_string();
        let mut env = vec![("CUBA_EXEC_CONFIG", path.as_str()), LAPTOP_MARK];
        env.extend_from_slice(set);
        mcp::binary(&mut self.local, name, &env).await
    }

    /// The ssh clients the shim runs to reach `box` and `down` (by their config file).
    pub fn ssh_clients(&self) -> Vec<i32> {
        let config = self.sshd.config_path().display().to_string();
        procfs::with_cmdline(&config)
            .into_iter()
            .filter(|pid| procfs::cmdline(*pid).starts_with("ssh "))
            .collect()
    }
}
