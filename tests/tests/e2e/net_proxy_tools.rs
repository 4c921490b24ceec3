//! Real package managers under `network = "proxy"`: pip and npm install from a loopback
//! registry (tests/fixtures/registry.py) that the proxy's rules allow, and fail without it
//! ever being reached when the rules do not; and credentials files masked in the daemon's
//! home (`~/.npmrc`, `~/.config/pip/pip.conf`) are refused to the command without breaking
//! the tool that tries to read them. Names come from a hosts file of the daemon's own mount
//! namespace, all on 127.0.0.1.

#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::SpawnRequest;
use cuba_tests::{bounded, spawn_req, spawn_with, text, wait_exit_within, TestDaemon, STEP};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long one pip or npm run may take (a loaded 2-core machine, a cold interpreter).
const TOOL_RUN: Duration = Duration::from_secs(120);

/// tests/fixtures/registry.py serving a PEP 503 index and an npm registry whose URLs name
/// `host`, its request lines logged; killed when dropped.
struct Registry {
    child: tokio::process::Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Registry {
    async fn start(python: &Path, host: &str) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("srv");
        std::fs::create_dir(&root).unwrap();
        let log = dir.path().join("requests.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/registry.py");
        // stdin stays open in `child` for as long as the guard lives: the server exits on EOF.
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .arg(&root)
            .arg(host)
            .arg(&log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        bounded("the registry's port", STEP, out.read_line(&mut line))
            .await
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("registry.py printed {line:?}, not a port"));
        Registry {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// The request lines the registry has received so far.
    fn seen(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The python3 whose `-m pip` works, by its real path (a pyenv shim would need the test's
/// HOME, which the command does not get).
fn pip_python() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let python = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    let pip = std::process::Command::new(&python)
        .args(["-m", "pip", "--version"])
        .output()
        .ok()?;
    pip.status.success().then_some(python)
}

/// Whether `npm` and `node` run here.
fn have_npm() -> bool {
    ["npm", "node"].iter().all(|p| {
        std::process::Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Whether this machine can run these tests (a hosts file needs root, a mount namespace);
/// says why not when it cannot.
fn can_run(what: &str, tool: bool) -> bool {
    if !cuba_tests::machine::root() {
        cuba_tests::machine::skip(what, "the daemon's hosts file needs root");
        return false;
    }
    if !tool {
        cuba_tests::machine::skip(what, "the tool is not installed");
        return false;
    }
    true
}

/// A hosts file naming `name` as 127.0.0.1, in `dir`.
fn hosts(dir: &Path, name: &str) -> PathBuf {
    let file = dir.join("hosts");
    std::fs::write(&file, format!("127.0.0.1 localhost\n127.0.0.1 {name}\n")).unwrap();
    file
}

/// A daemon confining writes to `work`, whose commands' only way out is the proxy allowing
/// `allow` (nothing when empty), with `extra` settings.
async fn proxied(
    dir: &Path,
    name: &str,
    work: &Path,
    allow: &str,
    extra: &[(&str, &str)],
) -> TestDaemon {
    TestDaemon::builder()
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .env("CUBA_EXEC_ALLOWED_DIRS", work.to_str().unwrap())
        .env("CUBA_EXEC_NETWORK", "proxy")
        .env("CUBA_EXEC_PROXY_ALLOW", allow)
        .envs(extra)
        .hosts_file(&hosts(dir, name))
        .start()
        .await
}

/// Runs `command` in `cwd` with `env` over the test's environment, to its end (bounded by
/// [`TOOL_RUN`]): its exit code and output.
async fn run(
    c: &Client,
    command: &str,
    cwd: &Path,
    env: &[(&str, OsString)],
) -> (Option<i32>, String) {
    let req = SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        env: env
            .iter()
            .map(|(k, v)| (OsString::from(k), v.clone()))
            .collect(),
        ..spawn_req(command)
    };
    let p = spawn_with(c, req).await;
    let done = wait_exit_within(c, p.id, TOOL_RUN).await;
    (done.process.exit_code, text(&done.output.bytes()))
}

/// A new directory `name` under `parent` (canonical: the allowed dirs are compared as such).
fn mkdir(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

fn pip_command(python: &Path, port: u16) -> String {
    let py = python.display();
    format!(
        "{py} -m pip install --no-cache-dir --disable-pip-version-check \
         --index-url http://pypi.test:{port}/simple --trusted-host pypi.test --target ./site cubatiny && \
         {py} -c 'import sys; sys.path.insert(0,\"site\"); import cubatiny; print(cubatiny.VALUE)'"
    )
}

/// pip's environment: a home of its own (no pip.conf of the test's user), no prompts, and
/// none of the machine's `PIP_FIND_LINKS` (only the registry may offer the package).
fn pip_env(home: &Path) -> Vec<(&'static str, OsString)> {
    vec![
        ("HOME", home.into()),
        ("PIP_NO_INPUT", "1".into()),
        ("PIP_FIND_LINKS", "".into()),
    ]
}

fn npm_command(port: u16) -> String {
    format!(
        "npm install --no-audit --no-fund --no-update-notifier \
         --registry http://npm.test:{port}/ cuba-tiny && \
         node -e 'console.log(require(\"cuba-tiny\"))'"
    )
}

/// An empty npm project in `work`, and npm's environment: `home`, a cache in the workspace
/// (where the sandbox lets it write), no update check.
fn npm_project(work: &Path, home: &Path) -> Vec<(&'static str, OsString)> {
    std::fs::write(
        work.join("package.json"),
        "{\"name\":\"work\",\"version\":\"1.0.0\",\"private\":true}\n",
    )
    .unwrap();
    vec![
        ("HOME", home.into()),
        ("npm_config_cache", work.join(".npm-cache").into()),
        ("npm_config_update_notifier", "false".into()),
    ]
}

/// The output's last line, trimmed (what the final `print`/`console.log` wrote).
fn last_line(out: &str) -> &str {
    out.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_installs_from_an_allowed_registry_through_the_proxy() {
    let python = pip_python();
    if !can_run("pip through the proxy", python.is_some()) {
        return;
    }
    let python = python.unwrap();
    let reg = Registry::start(&python, "pypi.test").await;
    let port = reg.port;
    let dir = tempfile::tempdir().unwrap();
    let home = mkdir(dir.path(), "home");
    let work = mkdir(dir.path(), "work");
    let d = proxied(
        dir.path(),
        "pypi.test",
        &work,
        &format!("pypi.test:{port}"),
        &[],
    )
    .await;
    let c = d.client().await;
    let (code, out) = run(&c, &pip_command(&python, port), &work, &pip_env(&home)).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(last_line(&out), "42", "{out}");
    let seen = reg.seen();
    assert!(
        seen.iter()
            .any(|l| l.starts_with("GET /packages/cubatiny-1.0-py3-none-any.whl ")),
        "{seen:?}"
    );
    drop(c);
    drop(d);

    // No rule names the host: pip fails, and the registry never hears of it (the proxy decided,
    // not the registry or the name).
    let before = reg.seen().len();
    let work = mkdir(dir.path(), "work-denied");
    let d = proxied(dir.path(), "pypi.test", &work, "", &[]).await;
    let c = d.client().await;
    let (code, out) = run(&c, &pip_command(&python, port), &work, &pip_env(&home)).await;
    assert_ne!(code, Some(0), "{out}");
    assert!(!work.join("site/cubatiny").exists(), "{out}");
    assert_eq!(reg.seen()[before..], [] as [String; 0], "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_installs_from_an_allowed_registry_through_the_proxy() {
    let python = pip_python().unwrap_or_else(|| PathBuf::from("python3"));
    if !can_run("npm through the proxy", have_npm()) {
        return;
    }
    let reg = Registry::start(&python, "npm.test").await;
    let port = reg.port;
    let dir = tempfile::tempdir().unwrap();
    let home = mkdir(dir.path(), "home");
    let work = mkdir(dir.path(), "work");
    let env = npm_project(&work, &home);
    let d = proxied(
        dir.path(),
        "npm.test",
        &work,
        &format!("npm.test:{port}"),
        &[],
    )
    .await;
    let c = d.client().await;
    let (code, out) = run(&c, &npm_command(port), &work, &env).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(last_line(&out), "42", "{out}");
    let seen = reg.seen();
    assert!(
        seen.iter().any(|l| l.starts_with("GET /cuba-tiny ")),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.starts_with("GET /cuba-tiny/-/cuba-tiny-1.0.0.tgz ")),
        "{seen:?}"
    );
    drop(c);
    drop(d);

    // No rule names the host: npm fails without the registry seeing a request.
    let before = reg.seen().len();
    let work = mkdir(dir.path(), "work-denied");
    let env = npm_project(&work, &home);
    let d = proxied(dir.path(), "npm.test", &work, "", &[]).await;
    let c = d.client().await;
    let (code, out) = run(&c, &npm_command(port), &work, &env).await;
    assert_ne!(code, Some(0), "{out}");
    assert!(!work.join("node_modules/cuba-tiny").exists(), "{out}");
    assert_eq!(reg.seen()[before..], [] as [String; 0], "{out}");
}

/// A home outside `/tmp` (masks are read at each start, and the temp dir must stay free of
/// them) holding `files`, with a workspace `work`.
fn home_with(prefix: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap();
    let home = dir.path().canonicalize().unwrap();
    for (name, body) in files {
        let file = home.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, body).unwrap();
    }
    let work = mkdir(&home, "work");
    (dir, home, work)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_npmrc_masked_in_the_daemons_home_does_not_break_npm() {
    let python = pip_python().unwrap_or_else(|| PathBuf::from("python3"));
    if !can_run("npm with a masked ~/.npmrc", have_npm()) {
        return;
    }
    let reg = Registry::start(&python, "npm.test").await;
    let port = reg.port;
    let (_keep, home, work) = home_with(
        "cx-npmrc-",
        &[(".npmrc", "//npm.test/:_authToken=SECRET\n")],
    );
    let env = npm_project(&work, &home);
    let dir = tempfile::tempdir().unwrap();
    let d = proxied(
        dir.path(),
        "npm.test",
        &work,
        &format!("npm.test:{port}"),
        &[("HOME", home.to_str().unwrap())],
    )
    .await;
    let c = d.client().await;
    // The command's HOME is the daemon's: npm reads the masked ~/.npmrc as its user config.
    let (code, out) = run(&c, &npm_command(port), &work, &env).await;
    eprintln!("npm with a masked ~/.npmrc (exit {code:?}):\n{out}");
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(last_line(&out), "42", "{out}");
    assert!(!out.contains("SECRET"), "{out}");
    let seen = reg.seen();
    assert!(
        seen.iter()
            .any(|l| l.starts_with("GET /cuba-tiny/-/cuba-tiny-1.0.0.tgz ")),
        "{seen:?}"
    );
    // npm went on without the file (a readable one lists `_authToken = (protected)`), and
    // the command may not read it either.
    let (code, out) = run(&c, "npm config list", &work, &env).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("_authToken"), "{out}");
    let (code, out) = run(&c, "cat ~/.npmrc", &work, &env).await;
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains("Permission denied") && !out.contains("SECRET"),
        "{out}"
    );
    assert!(std::fs::read_to_string(home.join(".npmrc"))
        .unwrap()
        .contains("SECRET"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pip_conf_masked_in_the_daemons_home_does_not_break_pip() {
    let python = pip_python();
    if !can_run("pip with a masked pip.conf", python.is_some()) {
        return;
    }
    let python = python.unwrap();
    let reg = Registry::start(&python, "pypi.test").await;
    let port = reg.port;
    // Settings pip would list if it could read them.
    let conf = "[global]\nindex-url = http://user:SECRET@pypi.test:1/simple\n";
    let (_keep, home, work) = home_with(
        "cx-pipconf-",
        &[
            (".config/pip/pip.conf", conf),
            (".pypirc", "[pypi]\npassword = SECRET\n"),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let d = proxied(
        dir.path(),
        "pypi.test",
        &work,
        &format!("pypi.test:{port}"),
        &[("HOME", home.to_str().unwrap())],
    )
    .await;
    let c = d.client().await;
    // The command's HOME is the daemon's: pip looks for its user config there.
    let (code, out) = run(&c, &pip_command(&python, port), &work, &pip_env(&home)).await;
    eprintln!("pip with a masked ~/.config/pip/pip.conf (exit {code:?}):\n{out}");
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(last_line(&out), "42", "{out}");
    assert!(!out.contains("SECRET"), "{out}");
    // pip skips the unreadable file without a word (`pip config debug` still says it
    // exists), and the command may not read it either.
    let list = format!("{} -m pip config list", python.display());
    let (code, out) = run(&c, &list, &work, &pip_env(&home)).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        !out.contains("index-url") && !out.contains("SECRET"),
        "{out}"
    );
    let (code, out) = run(
        &c,
        "cat ~/.config/pip/pip.conf ~/.pypirc",
        &work,
        &pip_env(&home),
    )
    .await;
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains("Permission denied") && !out.contains("SECRET"),
        "{out}"
    );
}
