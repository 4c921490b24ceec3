//! What `/proc` says about processes: whether a pid is alive, which processes carry a cuba-exec
//! marker in their environment, command lines and memory use.

use std::fs;
use std::path::Path;

/// The state letter of `/proc/<pid>/stat` (after the parenthesised command name).
fn state(pid: i32) -> Option<char> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..].trim_start().chars().next()
}

/// True if `pid` exists and is not a zombie (or dead).
pub fn pid_alive(pid: i32) -> bool {
    state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// Every pid in `/proc`.
pub fn all_pids() -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live processes whose environment has an entry starting with `prefix` (e.g.
/// `CUBA_EXEC_PROCESS=<instance>.` for all of a daemon's processes, or with the id appended and
/// `exact` for one process's tree).
pub fn with_env(prefix: &str, exact: bool) -> Vec<i32> {
    with_env_entry(|kv| {
        if exact {
            kv == prefix.as_bytes()
        } else {
            kv.starts_with(prefix.as_bytes())
        }
    })
}

/// Live processes with an environment entry (`NAME=value`) for which `matches` holds.
pub fn with_env_entry(matches: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|pid| {
            let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            env.split(|b| *b == 0).any(&matches)
        })
        .filter(|pid| pid_alive(*pid))
        .collect()
}

/// The parent of `pid` (`PPid` of `/proc/<pid>/status`), if it still exists.
pub fn parent(pid: i32) -> Option<i32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("PPid:"))?;
    line.trim().parse().ok()
}

/// The command line of `pid`, arguments joined with spaces (empty if it is gone).
pub fn cmdline(pid: i32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Live processes whose command line contains `needle`.
pub fn with_cmdline(needle: &str) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|pid| pid_alive(*pid) && cmdline(*pid).contains(needle))
        .collect()
}

/// Resident memory of `pid` in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn vm_rss_kib(pid: i32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Sends SIGKILL to `pid`, ignoring a process that is already gone.
pub fn kill9(pid: i32) {
    if pid > 0 {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Total size of the files directly in `dir` (files vanishing meanwhile count as empty).
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// How many descriptors process `pid` has open (`/proc/PID/fd`); 0 if it is gone.
pub fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}
