//! Windows: what the daemon asks of the system there. [`job`] (a command's tree as a Job
//! Object) and [`conpty`] (a command's terminal); [`console`] (Ctrl-Break, the daemon's own
//! Ctrl-C); and the concerns the shared request path calls through `platform`: [`proc`]
//! (process facts from a Tool Help snapshot), [`cgroup`] (a Job Object per command),
//! [`signal`] (protocol signals as Windows actions), [`limits`] (no rlimits) and [`sandbox`]
//! (unavailable); [`threaded`] (blocking pipes as the runtime's events) and [`master`] (a
//! command's terminal as the supervisor reads it). The reaper's stand-in is `reaper.rs`.

pub mod cgroup;
pub mod conpty;
pub mod console;
pub mod input;
pub mod job;
pub mod limits;
pub mod lock;
pub mod master;
pub mod proc;
pub mod sandbox;
pub mod signal;
pub mod threaded;

/// What `list_hosts` and `daemon status` say of the sandbox on Windows.
pub const SANDBOX: &str = "the sandbox is unavailable on Windows (no write confinement or network \
                           cut-off is built for it yet: Landlock and Seatbelt have no equivalent \
                           wired up there)";

/// The shell commands run with when none is set: PowerShell 7, else Windows PowerShell, else
/// `cmd.exe`, whichever is on `PATH` (under Wine, whose PowerShell is a stub, `cmd.exe`).
pub fn default_shell() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    // Wine's powershell.exe is a stub that runs nothing.
    let wine = cuba_protocol::win::wine().is_some();
    let on_path = |exe: &str| {
        !(wine && exe.starts_with("powershell"))
            && std::env::split_paths(&path).any(|dir| dir.join(exe).is_file())
    };
    crate::platform::win_shell::default_shell(on_path).to_string()
}
