//! Tests of socket, lock and state-directory discovery.
//!
//! The environment-dependent functions are tested in one test function: this binary has no other
//! test that could read the environment while it is changed.

#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use std::env;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cuba_protocol::paths::{self, MAX_SOCKET_PATH};

const VARS: [&str; 5] = [
    "CUBA_EXEC_SOCKET",
    "XDG_RUNTIME_DIR",
    "CUBA_EXEC_STATE_DIR",
    "XDG_STATE_HOME",
    "CUBA_EXEC_DAEMON",
];

fn current_uid() -> u32 {
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().metadata().unwrap().uid()
}

#[test]
fn lock_path_appends_lock() {
    assert_eq!(
        paths::lock_path(Path::new("/run/user/1000/cuba-exec/cubad.sock")),
        PathBuf::from("/run/user/1000/cuba-exec/cubad.sock.lock")
    );
    assert_eq!(
        paths::lock_path(Path::new("relative.sock")),
        PathBuf::from("relative.sock.lock")
    );
    // Non-UTF-8 bytes survive.
    let odd = Path::new(OsStr::from_bytes(b"/tmp/\xff.sock"));
    assert_eq!(
        paths::lock_path(odd).as_os_str().as_bytes(),
        b"/tmp/\xff.sock.lock"
    );
    assert_eq!(
        paths::daemon_log(Path::new("/s")),
        PathBuf::from("/s/cubad.log")
    );
}

#[test]
fn environment_overrides() {
    let saved: Vec<_> = VARS.iter().map(|v| (*v, env::var_os(v))).collect();
    for var in VARS {
        env::remove_var(var);
    }

    // Socket: $CUBA_EXEC_SOCKET, else $XDG_RUNTIME_DIR/cuba-exec, else <temp>/cuba-exec-$UID,
    // <temp> being /tmp on Linux and the per-user $TMPDIR on macOS.
    let temp = env::var_os("TMPDIR")
        .filter(|t| cfg!(target_os = "macos") && !t.is_empty())
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    let fallback = temp
        .join(format!("cuba-exec-{}", current_uid()))
        .join("cubad.sock");
    assert_eq!(paths::socket_path(), fallback);
    assert!(fallback.as_os_str().len() <= MAX_SOCKET_PATH);
    env::set_var("XDG_RUNTIME_DIR", "/run/user/5");
    assert_eq!(
        paths::socket_path(),
        PathBuf::from("/run/user/5/cuba-exec/cubad.sock")
    );
    env::set_var("CUBA_EXEC_SOCKET", "/tmp/t/x.sock");
    assert_eq!(paths::socket_path(), PathBuf::from("/tmp/t/x.sock"));
    // Empty is the same as unset.
    env::set_var("CUBA_EXEC_SOCKET", "");
    assert_eq!(
        paths::socket_path(),
        PathBuf::from("/run/user/5/cuba-exec/cubad.sock")
    );
    env::set_var("XDG_RUNTIME_DIR", "");
    assert_eq!(paths::socket_path(), fallback);

    // State directory: $CUBA_EXEC_STATE_DIR, else $XDG_STATE_HOME/cuba-exec, else elsewhere.
    env::set_var("XDG_STATE_HOME", "/st");
    assert_eq!(paths::state_dir(), PathBuf::from("/st/cuba-exec"));
    env::set_var("CUBA_EXEC_STATE_DIR", "/custom/state");
    assert_eq!(paths::state_dir(), PathBuf::from("/custom/state"));
    env::set_var("CUBA_EXEC_STATE_DIR", "");
    env::set_var("XDG_STATE_HOME", "");
    assert!(paths::state_dir().ends_with("cuba-exec") || paths::state_dir().ends_with("state"));

    // Daemon binary: $CUBA_EXEC_DAEMON, else `cubad` beside this executable, else on PATH.
    env::set_var("CUBA_EXEC_DAEMON", "/opt/cubad");
    assert_eq!(paths::daemon_binary(), PathBuf::from("/opt/cubad"));
    env::remove_var("CUBA_EXEC_DAEMON");
    assert!(paths::daemon_binary().ends_with("cubad"));

    for (var, value) in saved {
        match value {
            Some(v) => env::set_var(var, v),
            None => env::remove_var(var),
        }
    }
}
