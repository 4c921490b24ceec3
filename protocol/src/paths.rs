//! Where things live: the socket, its lock, the state directory, the daemon binary.

use std::env;
use std::path::{Path, PathBuf};

#[cfg(unix)]
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
/// `<temp>/cuba-exec-$UID/cubad.sock`, where `<temp>` is `/tmp` on Linux and the per-user
/// `$TMPDIR` on macOS (`/tmp` when it is unset).
#[cfg(unix)]
pub fn socket_path() -> PathBuf {
    if let Some(p) = non_empty("CUBA_EXEC_SOCKET") {
        return p;
    }
    match non_empty("XDG_RUNTIME_DIR") {
        Some(dir) => dir.join("cuba-exec").join("cubad.sock"),
        None => fallback_socket(non_empty("TMPDIR"), USE_TMPDIR, uid()),
    }
}

/// `$CUBA_EXEC_SOCKET`, else the user's pipe, `\\.\pipe\cuba-exec-<SID>`
/// ([`crate::win::pipe_name`]); the user's name stands in for the SID if Windows will not say it.
#[cfg(windows)]
pub fn socket_path() -> PathBuf {
    if let Some(p) = non_empty("CUBA_EXEC_SOCKET") {
        return p;
    }
    let user = crate::win::user_sid()
        .ok()
        .or_else(|| env::var("USERNAME").ok())
        .unwrap_or_else(|| "user".into());
    crate::win::pipe_name(&user)
}

/// Whether sockets without `XDG_RUNTIME_DIR` go under `$TMPDIR`: macOS gives each user a private
/// one (and has no XDG runtime dir); elsewhere `$TMPDIR` may be shared or long, `/tmp` is known.
#[cfg(unix)]
const USE_TMPDIR: bool = cfg!(target_os = "macos");

#[cfg(unix)]
fn fallback_socket(tmpdir: Option<PathBuf>, use_tmpdir: bool, uid: u32) -> PathBuf {
    let base = tmpdir
        .filter(|_| use_tmpdir)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join(format!("cuba-exec-{uid}")).join("cubad.sock")
}

/// The lock file that makes one daemon per socket: `<socket>.lock`. It holds the daemon's pid.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// `$CUBA_EXEC_STATE_DIR`, else `$XDG_STATE_HOME/cuba-exec`, else the system's per-user
/// state place plus `cuba-exec` (Linux: `~/.local/state`, macOS: `~/Library/Application
/// Support`, Windows: `%LOCALAPPDATA%`), else `/tmp/cuba-exec-$UID/state` (Windows: the
/// temporary directory's `cuba-exec\state`).
pub fn state_dir() -> PathBuf {
    if let Some(p) = non_empty("CUBA_EXEC_STATE_DIR") {
        return p;
    }
    if let Some(p) = non_empty("XDG_STATE_HOME") {
        return p.join("cuba-exec");
    }
    match directories::BaseDirs::new().and_then(|d| system_state_base(&d)) {
        Some(dir) => dir.join("cuba-exec"),
        #[cfg(unix)]
        None => PathBuf::from(format!("/tmp/cuba-exec-{}", uid())).join("state"),
        #[cfg(windows)]
        None => env::temp_dir().join("cuba-exec").join("state"),
    }
}

/// macOS has no state directory of its own (`directories` gives none there): state goes where
/// applications keep their data. Windows neither: state is the machine's own, not roamed, so
/// `%LOCALAPPDATA%`.
fn system_state_base(d: &directories::BaseDirs) -> Option<PathBuf> {
    if cfg!(target_os = "macos") {
        Some(d.data_dir().to_path_buf())
    } else if cfg!(windows) {
        Some(d.data_local_dir().to_path_buf())
    } else {
        d.state_dir().map(Path::to_path_buf)
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
            let sibling = dir.join(DAEMON);
            if sibling.is_file() {
                return sibling;
            }
        }
    }
    PathBuf::from(DAEMON)
}

const DAEMON: &str = if cfg!(windows) { "cubad.exe" } else { "cubad" };

/// The longest Unix socket path, in bytes: it must fit `sun_path` with its NUL, 104 bytes on
/// macOS (and the BSDs), 108 on Linux.
#[cfg(unix)]
pub const MAX_SOCKET_PATH: usize = sun_path_len() - 1;

#[cfg(unix)]
const fn sun_path_len() -> usize {
    // SAFETY: `sockaddr_un` is integers and a byte array: all zero bits is a valid value. Only
    // the array's length is read, so the system's own header decides.
    let addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_path.len()
}

/// The settings file shared by the daemon and its clients: `$CUBA_EXEC_CONFIG` (then it must
/// exist: `true`), else `$XDG_CONFIG_HOME/cuba-exec/config.toml` or
/// `~/.config/cuba-exec/config.toml` (may be absent); on Windows
/// `%APPDATA%\cuba-exec\config.toml`, where Windows programs keep a user's settings.
/// `lookup` reads a variable.
pub fn config_file(lookup: &impl Fn(&str) -> Option<String>) -> Option<(PathBuf, bool)> {
    if let Some(p) = lookup("CUBA_EXEC_CONFIG").filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(p), true));
    }
    if cfg!(windows) {
        let base = lookup("APPDATA").filter(|p| !p.is_empty())?;
        return Some((
            PathBuf::from(base).join("cuba-exec").join("config.toml"),
            false,
        ));
    }
    let base = lookup("XDG_CONFIG_HOME")
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| lookup("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some((base.join("cuba-exec").join("config.toml"), false))
}

/// Whether `program` is an executable file in a directory of `PATH`.
pub fn on_path(program: &str) -> bool {
    let Some(path) = env::var_os("PATH") else {
        return false;
    };
    env::split_paths(&path).any(|dir| {
        let file = dir.join(program);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        }
        #[cfg(not(unix))]
        {
            file.is_file() || file.with_extension("exe").is_file()
        }
    })
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    #[test]
    fn socket_fallback_per_system() {
        let tmp = Some(PathBuf::from("/var/folders/xy/abc/T/"));
        // macOS: the per-user temporary directory.
        assert_eq!(
            fallback_socket(tmp.clone(), true, 501),
            PathBuf::from("/var/folders/xy/abc/T/cuba-exec-501/cubad.sock")
        );
        assert_eq!(
            fallback_socket(None, true, 501),
            PathBuf::from("/tmp/cuba-exec-501/cubad.sock")
        );
        // Linux: always /tmp.
        assert_eq!(
            fallback_socket(tmp, false, 1000),
            PathBuf::from("/tmp/cuba-exec-1000/cubad.sock")
        );
    }

    #[test]
    fn sun_path_limit_is_the_systems() {
        let expected = if cfg!(target_os = "linux") { 107 } else { 103 };
        assert_eq!(MAX_SOCKET_PATH, expected);
        // A typical macOS `$TMPDIR` leaves room to spare.
        let mac = fallback_socket(
            Some(PathBuf::from(
                "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/",
            )),
            true,
            501,
        );
        assert!(mac.as_os_str().len() <= 103, "{}", mac.display());
    }
}
