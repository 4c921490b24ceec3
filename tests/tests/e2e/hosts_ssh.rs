//! `cubactl` reaching another machine's daemon over a real `sshd` on 127.0.0.1: the
//! `ssh = "ALIAS"` way a user configures a host, with `~/.ssh/config` given as `-F`.

use std::path::PathBuf;
use std::process::{Command, Output};

use cuba_tests::sshd::{output_within, SshServer};
use cuba_tests::{bin, TestDaemon, STEP};

struct World {
    /// The "remote" daemon: its own socket, state and environment.
    remote: TestDaemon,
    sshd: SshServer,
    config: PathBuf,
    /// This machine's state (the local daemon `ps --all-hosts` starts).
    local: tempfile::TempDir,
}

impl World {
    async fn new() -> World {
        let remote = TestDaemon::builder()
            .env("CUBA_TEST_REMOTE_MARK", "remote-side")
            .start()
            .await;
        let sshd = SshServer::start();
        sshd.add_daemon_host("box", &remote);
        sshd.add_unreachable_host("down");
        let local = tempfile::Builder::new()
            .prefix("ch")
            // Private, as the daemon requires of its socket and state directories.
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in("/tmp")
            .expect("a temp dir");
        let config = local.path().join("config.toml");
        let mut text = String::new();
        for name in ["box", "down"] {
            text.push_str(&format!(
                "[hosts.{name}]\nssh = {name:?}\nssh_options = [\"-F\", {:?}]\nremote_bin = {:?}\n\n",
                sshd.config_path().display().to_string(),
                bin("cubactl").display().to_string()
            ));
        }
        std::fs::write(&config, text).expect("the config");
        World {
            remote,
            sshd,
            config,
            local,
        }
    }

    fn cubactl(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(bin("cubactl"));
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("CUBA_EXEC_") {
                cmd.env_remove(k);
            }
        }
        let dir = self.local.path();
        cmd.args(args)
            .env("CUBA_EXEC_CONFIG", &self.config)
            .env("CUBA_EXEC_SOCKET", dir.join("s"))
            .env("CUBA_EXEC_STATE_DIR", dir.join("state"))
            .env("CUBA_EXEC_DAEMON", bin("cubad"));
        output_within(cmd, STEP)
            .unwrap_or_else(|| panic!("cubactl {args:?} timed out; sshd log:\n{}", self.sshd.log()))
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cubactl(args);
        assert!(
            out.status.success(),
            "cubactl {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // The daemon `ps --all-hosts` started here, found by its lock file.
        let lock = self.local.path().join("s.lock");
        if let Some(pid) = std::fs::read_to_string(lock)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            cuba_tests::procfs::kill9(pid);
        }
        cuba_tests::cgroups::remove_instance_of(&self.local.path().join("state"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_drives_a_host_over_ssh() {
    let w = World::new().await;
    let out = w.cubactl(&[
        "--host",
        "box",
        "run",
        "--",
        "sh",
        "-c",
        "echo $CUBA_TEST_REMOTE_MARK; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "remote-side\n");
    let id = w.ok(&["--host", "box", "start", "--", "sleep 300"]);
    let id = id.trim();
    let id_num: u64 = id.parse().expect("start prints the id");
    assert!(
        !w.remote.marked(id_num).is_empty(),
        "it runs under the remote daemon"
    );
    let ps = w.ok(&["--host", "box", "ps"]);
    assert!(ps.contains("sleep 300"), "{ps}");
    let all = w.ok(&["ps", "--all-hosts"]);
    assert!(all.contains("HOST") && all.contains("box"), "{all}");
    let hosts = w.ok(&["hosts", "--json"]);
    let hosts: serde_json::Value = serde_json::from_str(&hosts).expect("json");
    let rows = hosts.as_array().expect("rows");
    let find = |n: &str| rows.iter().find(|r| r["name"] == n).cloned();
    let good = find("box").expect("box listed");
    assert_eq!(good["ok"], true, "{good}");
    assert_eq!(good["version"], cuba_protocol::VERSION, "{good}");
    let down = find("down").expect("down listed");
    assert_eq!(down["ok"], false, "{down}");
    assert!(
        down["state"]
            .as_str()
            .unwrap_or("")
            .contains("Connection refused"),
        "{down}"
    );
    let out = w.ok(&["--host", "box", "kill", id]);
    assert!(out.contains("killed"), "{out}");
    assert!(
        cuba_tests::wait_for(|| w.remote.marked(id_num).is_empty(), STEP).await,
        "the remote tree is gone"
    );
}
