//! A container host made ready before its bridge starts: the container found (or made from its
//! image, or started again), and `cubactl` found inside or put there from this machine's build.
//! Each step is one engine command with a bound; each failure says what to do.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::Container;

/// Where a copy of this machine's `cubactl` and `cubad` goes inside a container that has none.
pub const COPY_DIR: &str = "/opt/cuba-exec/bin";
/// An engine command that takes longer is killed: the engine is stuck.
const STEP: Duration = Duration::from_secs(60);
/// The container's first process when made from an image: it waits, and ends on `stop`
/// at once (a shell as pid 1 ignores SIGTERM it does not trap).
const KEEP_RUNNING: &str = "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done";
/// What the probe prints: whether `cubactl` is on the container's `PATH`, the copy's version
/// and size, the architecture.
const PROBE: &str = "echo \"path=$(command -v cubactl)\"; \
     echo \"copy=$(/opt/cuba-exec/bin/cubactl --version 2>/dev/null) \
     $(wc -c </opt/cuba-exec/bin/cubactl 2>/dev/null)\"; echo \"arch=$(uname -m)\"";

/// What an engine command did.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn engine(c: &Container, args: &[&str]) -> Result<Ran, String> {
    let program = c.engine();
    let mut cmd = Command::new(&program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "`{program}` is not installed here (not found on PATH): install podman or docker, \
             or set `engine` to its path"
        ),
        _ => format!("cannot run `{program}`: {e}"),
    })?;
    let out = tokio::time::timeout(STEP, child.wait_with_output())
        .await
        .map_err(|_| {
            format!(
                "`{program} {}` did not finish within {} s: is the engine stuck?",
                args.first().copied().unwrap_or_default(),
                STEP.as_secs()
            )
        })?
        .map_err(|e| format!("`{program}`: {e}"))?;
    Ok(Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        stderr: last_line(&String::from_utf8_lossy(&out.stderr)),
    })
}

/// The last line of an engine's stderr that says something.
fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    line.trim().chars().take(400).collect()
}

/// Gets `c` ready and returns the `cubactl` to run in it (`remote_bin` when given). `first`:
/// this client has not reached the host yet, or it was told it had stopped; then a stopped
/// container made from an image is started again. Otherwise a stopped container is an error:
/// it stopped under the client, and what ran in it ended with it.
pub async fn prepare(
    c: &Container,
    remote_bin: Option<&str>,
    first: bool,
) -> Result<String, String> {
    // The usual case, a running container, costs one engine command: the probe (or the
    // bridge itself, with `remote_bin`). Only when that fails is the container looked at.
    let probe = match remote_bin {
        Some(_) => None,
        None => Some(engine(c, &["exec", &c.name, "/bin/sh", "-c", PROBE]).await?),
    };
    let probe = match probe {
        Some(p) if p.ok => p,
        probe => {
            ready(c, first).await?;
            match (remote_bin, probe) {
                (Some(bin), _) => return Ok(bin.to_string()),
                _ => engine(c, &["exec", &c.name, "/bin/sh", "-c", PROBE]).await?,
            }
        }
    };
    if !probe.ok {
        return Err(format!(
            "cannot look for cubactl in container {} (it needs /bin/sh): {}",
            c.name, probe.stderr
        ));
    }
    install(c, &probe.stdout).await
}

/// Makes sure `c` runs: made from its image when missing, started again when stopped (see
/// [`prepare`] for when).
async fn ready(c: &Container, first: bool) -> Result<(), String> {
    let program = c.engine();
    let inspect = inspect(c).await?;
    if !inspect.ok {
        let missing = inspect.stderr.to_lowercase().contains("no such");
        return match (&c.image, missing) {
            (Some(image), true) => create(c, image).await,
            (None, true) => Err(format!(
                "container {} does not exist (`{program} ps -a` lists them); start it, or set \
                 `image` to have one made",
                c.name
            )),
            (_, false) => Err(format!(
                "`{program} container inspect {}` failed: {}",
                c.name, inspect.stderr
            )),
        };
    }
    let mut words = inspect.stdout.split_whitespace();
    let status = words.next().unwrap_or("unknown").to_string();
    let code = words.next().unwrap_or("?").to_string();
    if status == "running" {
        return Ok(());
    }
    match (&c.image, first) {
        (Some(_), true) => start(c).await,
        (Some(_), false) => Err(format!(
            "container {} stopped ({status}, exit code {code}) under this call; what ran in it \
             ended with it. The next call starts it again",
            c.name
        )),
        (None, _) => Err(format!(
            "container {} is not running ({status}, exit code {code}); start it with \
             `{program} start {}`{}",
            c.name,
            c.name,
            match first {
                true => "",
                false => ": it stopped under this call, and what ran in it ended",
            }
        )),
    }
}

/// Why a container host's link dropped, when it is because the container is no longer
/// running: `container dev stopped (exited, exit code 137)…`.
pub async fn stopped(c: &Container) -> Option<String> {
    let inspect = inspect(c).await.ok()?;
    let mut words = inspect.stdout.split_whitespace();
    let (status, code) = match inspect.ok {
        true => (words.next()?.to_string(), words.next().unwrap_or("?")),
        false => ("removed".to_string(), "?"),
    };
    (status != "running").then(|| {
        format!(
            "container {} stopped under this call ({status}, exit code {code}); what ran in it \
             ended with it",
            c.name
        )
    })
}

/// `ENGINE container inspect`: the container's status and exit code, as words.
async fn inspect(c: &Container) -> Result<Ran, String> {
    engine(
        c,
        &[
            "container",
            "inspect",
            "--format",
            "{{.State.Status}} {{.State.ExitCode}}",
            &c.name,
        ],
    )
    .await
}

async fn create(c: &Container, image: &str) -> Result<(), String> {
    let label = format!("io.cuba-exec.host={}", c.name);
    let mut args = vec!["run", "-d", "--name", &c.name, "--label", &label];
    args.extend(c.run_options.iter().map(String::as_str));
    args.extend([image, "/bin/sh", "-c", KEEP_RUNNING]);
    let ran = engine(c, &args).await?;
    if ran.ok {
        return Ok(());
    }
    // Another client made it between our look and our run: it is there now.
    if ran.stderr.contains("already in use") {
        return start(c).await;
    }
    Err(format!(
        "cannot make container {} from image {image}: {}",
        c.name, ran.stderr
    ))
}

async fn start(c: &Container) -> Result<(), String> {
    let ran = engine(c, &["start", &c.name]).await?;
    match ran.ok {
        true => Ok(()),
        false => Err(format!("cannot start container {}: {}", c.name, ran.stderr)),
    }
}

/// From what the probe said: the `cubactl` of the container's `PATH`, or a copy of this machine's put in [`COPY_DIR`]
/// (again when the one there is another build).
async fn install(c: &Container, probe: &str) -> Result<String, String> {
    let field = |key: &str| {
        probe
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    if !field("path").is_empty() {
        return Ok("cubactl".into());
    }
    let copy = format!("{COPY_DIR}/cubactl");
    let (cubactl, cubad) = local_build()?;
    if field("copy") == local_stamp(&cubactl)? {
        return Ok(copy);
    }
    let arch = field("arch");
    if !cfg!(target_os = "linux") || arch != std::env::consts::ARCH {
        return Err(format!(
            "cubactl is not in container {} ({arch}), and this machine's build is for {}/{}: \
             install cuba-exec in the image, or set remote_bin to its cubactl",
            c.name,
            std::env::consts::OS,
            std::env::consts::ARCH
        ));
    }
    // Copied under names of this client's own, then renamed: a client connecting at the same
    // time never runs half a file.
    let tag = std::process::id();
    let mkdir = engine(c, &["exec", &c.name, "mkdir", "-p", COPY_DIR]).await?;
    if !mkdir.ok {
        return Err(format!(
            "cannot make {COPY_DIR} in container {}: {}",
            c.name, mkdir.stderr
        ));
    }
    let mut moves = String::new();
    for (file, name) in [(&cubad, "cubad"), (&cubactl, "cubactl")] {
        let dest = format!("{}:{COPY_DIR}/{name}.{tag}", c.name);
        let from = file.display().to_string();
        let cp = engine(c, &["cp", &from, &dest]).await?;
        if !cp.ok {
            return Err(format!(
                "cannot copy {from} into container {}: {}",
                c.name, cp.stderr
            ));
        }
        moves.push_str(&format!(
            "mv -f {COPY_DIR}/{name}.{tag} {COPY_DIR}/{name} && "
        ));
    }
    moves.push_str("true");
    let mv = engine(c, &["exec", &c.name, "/bin/sh", "-c", &moves]).await?;
    match mv.ok {
        true => Ok(copy),
        false => Err(format!(
            "cannot put cubactl in place in container {}: {}",
            c.name, mv.stderr
        )),
    }
}

/// This machine's `cubactl` and `cubad`: beside the running program (they are installed
/// together), or `cubad` where `CUBA_EXEC_DAEMON` says.
fn local_build() -> Result<(PathBuf, PathBuf), String> {
    let cubad = crate::paths::daemon_binary();
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let cubactl = dir.join("cubactl");
    if !cubactl.is_file() || !cubad.is_file() {
        return Err(format!(
            "cubactl is not in the container, and there is none beside {} to copy in (cubactl \
             and cubad): install cuba-exec in the image, or set remote_bin",
            exe.display()
        ));
    }
    Ok((cubactl, cubad))
}

/// What the probe says of a copy made from `cubactl`: its `--version` line and its size, so
/// another build of the same version is copied again.
fn local_stamp(cubactl: &Path) -> Result<String, String> {
    let size = std::fs::metadata(cubactl)
        .map_err(|e| format!("{}: {e}", cubactl.display()))?
        .len();
    Ok(format!("cubactl {} {size}", env!("CARGO_PKG_VERSION")))
}
