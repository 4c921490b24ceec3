//! `sudo` and the askpass helper: the real `sudo -A` takes its password from `cubactl answer`
//! under a daemon of an ordinary user (sudo runs as root there, so the daemon cannot see its
//! program and knows it by its ids and name), and a program that only calls itself `sudo` (a
//! copy of `sh`, a script) gets no password, with nobody asked, on a plain daemon and in the
//! sandbox.

use std::path::Path;

use cuba_protocol::SpawnRequest;
use cuba_tests::{machine, spawn_req, Step, TestDaemon};

use super::password::{nothing_waits, refusals};
use super::{ask_lines, cubactl, ended};

/// A user made for one test, allowed `sudo /usr/bin/true` with its password (asked once, never
/// cached); removed with its sudoers file when dropped.
pub(super) struct SudoUser {
    pub(super) name: String,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) password: String,
    sudoers: std::path::PathBuf,
}

impl SudoUser {
    /// `None` (with why) where this machine cannot: not root, or no `sudo`/`useradd`.
    pub(super) fn make() -> Result<SudoUser, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("making a user for sudo needs root".into());
        }
        for tool in ["/usr/bin/sudo", "/usr/sbin/useradd", "/usr/sbin/chpasswd"] {
            if !Path::new(tool).exists() {
                return Err(format!("{tool} is not installed"));
            }
        }
        // One user per test: two tests in one run must not share (or kill) each other's.
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("cubasudo{}x{n}", std::process::id());
        let run = |cmd: &mut std::process::Command| {
            let out = cmd.output().map_err(|e| e.to_string())?;
            match out.status.success() {
                true => Ok(out),
                false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
            }
        };
        run(std::process::Command::new("/usr/sbin/useradd").args(["-M", "-s", "/bin/sh", &name]))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let sudoers = Path::new("/etc/sudoers.d").join(&name);
        // Dropped (and so removed) from here on, whatever fails next.
        let mut user = SudoUser {
            name: name.clone(),
            uid: 0,
            gid: 0,
            password: format!("pw-{nanos:x}-ok"),
            sudoers: sudoers.clone(),
        };
        let mut chpasswd = std::process::Command::new("/usr/sbin/chpasswd")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        if let Some(mut input) = chpasswd.stdin.take() {
            use std::io::Write;
            writeln!(input, "{name}:{}", user.password).map_err(|e| e.to_string())?;
        }
        if !chpasswd.wait().is_ok_and(|s| s.success()) {
            return Err("chpasswd failed".into());
        }
        let rules = format!(
            "Defaults:{name} !lecture, timestamp_timeout=0, passwd_tries=1\n\
             {name} ALL=(root) /usr/bin/true\n"
        );
        std::fs::write(&sudoers, rules).map_err(|e| e.to_string())?;
        let ids = run(std::process::Command::new("id").args(["-u", &name]))?;
        user.uid = String::from_utf8_lossy(&ids.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        let ids = run(std::process::Command::new("id").args(["-g", &name]))?;
        user.gid = String::from_utf8_lossy(&ids.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        assert!(user.uid != 0 && user.gid != 0, "the new user's ids");
        Ok(user)
    }
}

impl Drop for SudoUser {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.sudoers);
        let _ = std::process::Command::new("pkill")
            .args(["-KILL", "-u", &self.name])
            .status();
        let _ = std::process::Command::new("/usr/sbin/userdel")
            .arg(&self.name)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sudo_dash_a_takes_its_password_from_cubactl_answer() {
    let user = match SudoUser::make() {
        Ok(u) => u,
        Err(why) => return machine::skip("sudo -A through cubactl answer", &why),
    };
    // sudo raises privileges: possible only where execs are not checked (a checked process
    // may never gain any, see `privileges`).
    let d = TestDaemon::builder()
        .as_user(user.uid, user.gid)
        .env("CUBA_EXEC_EXEC_CHECKS", "off")
        .start()
        .await;
    let text = "sudo -A /usr/bin/true && echo sudo-ran; echo \"sudo $?\"";
    for right in [true, false] {
        let (ok, id, said) = cubactl(&d, &["start", text], None).await;
        assert!(ok, "{said}");
        let id = id.trim().to_string();
        // Returns once sudo asks (a password question is a wait for input).
        let (_, _, said) = cubactl(&d, &["wait", &id, "--timeout", "15s"], None).await;
        let prompt = format!("[sudo] password for {}:", user.name);
        // Named by the genuine sudo's path and its command line.
        let asks = "/usr/bin/sudo `sudo -A /usr/bin/true` asks for a password";
        assert!(
            said.contains(asks) && said.contains(&format!("answer {id}")),
            "{said}"
        );
        let (ok, listed, _) = cubactl(&d, &["approvals", "--json"], None).await;
        assert!(ok && listed.contains(&prompt), "{listed}");
        let given = match right {
            true => format!("{}\n", user.password),
            false => "wrong\n".to_string(),
        };
        let (ok, _, said) = cubactl(&d, &["answer", &id], Some(&given)).await;
        assert!(ok, "{said}");
        let (_, _, said) = cubactl(&d, &["wait", &id, "--timeout", "15s"], None).await;
        assert!(said.contains("exited"), "{said}");
        let (_, out, _) = cubactl(&d, &["logs", &id], None).await;
        match right {
            true => assert!(out.contains("sudo-ran") && out.contains("sudo 0"), "{out}"),
            false => assert!(!out.contains("sudo-ran") && out.contains("sudo 1"), "{out}"),
        }
    }
    for file in ["audit.jsonl", "journal.jsonl", "cubad.log"] {
        let text = std::fs::read_to_string(d.state_dir().join(file)).unwrap_or_default();
        assert!(!text.contains(&user.password), "{file} has the password");
    }
    assert!(!d.log().contains(&user.password));
    drop(d);
}

/// Runs two programs that only call themselves `sudo` from `work` under `d`: a copy of `sh`, and
/// a `#!/bin/sh` script; neither gets a password, nobody is asked, and the audit log says so.
async fn a_fake_sudo_is_refused(d: &TestDaemon, work: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let c = d.client().await;
    let copy = work.join("copy");
    let script = work.join("script");
    for dir in [&copy, &script] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::copy("/bin/sh", copy.join("sudo")).unwrap();
    let body = "#!/bin/sh\n\"$SUDO_ASKPASS\" '[sudo] password for me: '; echo \"askpass $?\"\n";
    std::fs::write(script.join("sudo"), body).unwrap();
    for dir in [&copy, &script] {
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(dir.join("sudo"), mode).unwrap();
    }
    // Without cargo's LD_LIBRARY_PATH (the user's own directories where the tests run as a
    // user), so that the refusal is for what the program is.
    let ways = [
        (
            &copy,
            "unset LD_LIBRARY_PATH; ./sudo -c '\"$SUDO_ASKPASS\" prompt; echo \"askpass $?\"'",
        ),
        (&script, "unset LD_LIBRARY_PATH; ./sudo"),
    ];
    for (dir, text) in ways {
        let req = SpawnRequest {
            cwd: Some(dir.as_os_str().to_owned()),
            ..spawn_req(text)
        };
        let p = c.spawn(req).step().await.unwrap();
        ended(&c, p.id).await;
        let out = String::from_utf8_lossy(&cuba_tests::read_all(&c, p.id).await).into_owned();
        assert!(
            out.contains("askpass 1")
                // The helper's stderr and the shell's stdout are two pipes, read as they come.
                && out.contains("cuba-askpass: no password: ")
                && out.contains("the program that ran cuba-askpass")
                && out.contains("is not a genuine sudo, ssh or git"),
            "{out}"
        );
        assert_eq!(ask_lines(d, p.id), ["refused"]);
        let refused = refusals(d, p.id);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0]["decision"], "refused");
        nothing_waits(d).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_only_calls_itself_sudo_gets_no_password() {
    // Were it asked, nobody would answer: the test ends in seconds either way.
    let plain = TestDaemon::builder()
        .env("CUBA_EXEC_APPROVAL_TIMEOUT", "5s")
        .start()
        .await;
    let work = plain.dir().join("work");
    a_fake_sudo_is_refused(&plain, &work).await;
    drop(plain);
    let root = tempfile::tempdir().unwrap();
    let work = root.path().canonicalize().unwrap().join("work");
    std::fs::create_dir(&work).unwrap();
    let sandboxed = TestDaemon::builder()
        .env("CUBA_EXEC_APPROVAL_TIMEOUT", "5s")
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .env("CUBA_EXEC_ALLOWED_DIRS", work.to_str().unwrap())
        .start()
        .await;
    a_fake_sudo_is_refused(&sandboxed, &work).await;
}
