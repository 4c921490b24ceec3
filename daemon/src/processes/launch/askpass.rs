//! The askpass helper's environment: what points `sudo -A`, ssh and git at `cuba-askpass`.

use std::ffi::OsString;

/// The variables that point programs asking for a password at the askpass helper
/// `cuba-askpass` beside the daemon's program, which asks the person through the daemon on
/// `socket`. None where the helper is not installed.
pub fn askpass_env(exe: &std::path::Path, socket: &std::path::Path) -> Vec<(OsString, OsString)> {
    let Some(helper) = exe
        .parent()
        .map(|d| d.join("cuba-askpass"))
        .filter(|h| h.is_file())
    else {
        return Vec::new();
    };
    let h = helper.into_os_string();
    vec![
        ("SUDO_ASKPASS".into(), h.clone()),
        ("SSH_ASKPASS".into(), h.clone()),
        // Even on a terminal: the password goes to the person, not to whoever reads the screen.
        ("SSH_ASKPASS_REQUIRE".into(), "force".into()),
        ("GIT_ASKPASS".into(), h),
        (
            "CUBA_EXEC_ASKPASS_SOCKET".into(),
            std::path::absolute(socket)
                .unwrap_or_else(|_| socket.to_path_buf())
                .into_os_string(),
        ),
    ]
}
