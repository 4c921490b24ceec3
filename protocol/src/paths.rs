//! Where things live: the socket, its lock, the state directory, the daemon binary.

use std::env;
use std::path::{Path, PathBuf};

fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

fn non_empty(var: &str) -> Option<PathBuf> {
    env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `$CUBA_EXEC_SOCKET`, else `$XDG_RUNTIME_DIR/cuba-exec/cubad.sock`, else
/// `/tmp/cuba-exec-$UID/cubad.sock`.
pub fn socket_path() -> PathBuf {
    if let Some(p) = non_empty("CUBA_EXEC_SOCKET") {
        return p;
    }
    match non_empty("XDG_RUNTIME_DIR") {
        Some(dir) => dir.join("cuba-exec").join("cubad.sock"),
        None => PathBuf::from(format!("/tmp/cuba-exec-{}", uid())).join("cubad.sock"),
    }
}

/// The lock file that makes one daemon per socket: `<socket>.lock`. It holds the daemon's pid.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// `$CUBA_EXEC_STATE_DIR`, else `$XDG_STATE_HOME/cuba-exec`, else `~/.local/state/cuba-exec`,
/// else `/tmp/cuba-exec-$UID/state`.
pub fn state_dir() -> PathBuf {
    if let Some(p) = non_empty("CUBA_EXEC_STATE_DIR") {
        return p;
    }
    if let Some(p) = non_empty("XDG_STATE_HOME") {
        return p.join("cuba-exec");
    }
    match directories::BaseDirs::new().and_then(|d| d.state_dir().map(Path::to_path_buf)) {
        Some(dir) => dir.join("cuba-exec"),
        None => PathBuf::from(format!("/tmp/cuba-exec-{}", uid())).join("state"),
    }
}

/// The daemon's log file inside a state directory.
pub fn daemon_log(state_dir: &Path) -> PathBuf {
    state_dir.join("cubad.log")
}

/// The `cubad` binary a client starts: `$CUBA_EXEC_DAEMON`, else `cubad` beside the running
/// executable, else `cubad` on `PATH`.
pub fn daemon_binary() -> PathBuf {
    if let Some(p) = non_empty("CUBA_EXEC_DAEMON") {
        return p;
    }
    if let Ok(exe) = env::current_exe() {
        if let Some(dir) = exe.parent() {
            let sibling = dir.join("cubad");
            if sibling.is_file() {
                return sibling;
            }
        }
    }
    PathBuf::from("cubad")
}

/// Unix socket paths must fit `sun_path` (108 bytes including the NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The settings file shared by the daemon and its clients: `$CUBA_EXEC_CONFIG` (then it must
/// exist: `true`), else `$XDG_CONFIG_HOME/cuba-exec/config.toml` or
/// `~/.config/cuba-exec/config.toml` (may be absent). `lookup` reads a variable.
pub fn config_file(lookup: &impl Fn(&str) -> Option<String>) -> Option<(PathBuf, bool)> {
    if let Some(p) = lookup("CUBA_EXEC_CONFIG").filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(p), true));
    }
    let base = lookup("XDG_CONFIG_HOME")
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| lookup("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some((base.join("cuba-exec").join("config.toml"), false))
}
