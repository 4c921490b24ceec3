//! What a test's daemons leave running: the processes carrying a daemon's marker in their
//! environment, and those given its socket as an argument. Linux reads `/proc`; macOS asks `ps`
//! (only this user's processes are readable, which is all a test starts).

use std::path::Path;

/// Live processes with the environment entry `entry` (`exact`), or one starting with it.
#[cfg(not(target_os = "macos"))]
pub fn marked(entry: &str, exact: bool) -> Vec<i32> {
    crate::procfs::with_env(entry, exact)
}

/// Live processes with `arg` as an argument, and their command lines (arguments joined by
/// spaces).
#[cfg(not(target_os = "macos"))]
pub fn given(arg: &Path) -> Vec<(i32, String)> {
    let arg = arg.to_string_lossy();
    crate::procfs::with_cmdline(&arg)
        .into_iter()
        .map(|pid| (pid, crate::procfs::cmdline(pid)))
        .filter(|(_, cmdline)| has_arg(cmdline, &arg))
        .collect()
}

/// Live processes with the environment entry `entry` (`exact`), or one starting with it: `ps -E`
/// appends each process's environment to its command line.
#[cfg(target_os = "macos")]
pub fn marked(entry: &str, exact: bool) -> Vec<i32> {
    ps(true)
        .into_iter()
        .filter(|(_, line)| {
            line.split(' ').any(|word| match exact {
                true => word == entry,
                false => word.starts_with(entry),
            })
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Live processes with `arg` as an argument, and their command lines (arguments joined by
/// spaces).
#[cfg(target_os = "macos")]
pub fn given(arg: &Path) -> Vec<(i32, String)> {
    let arg = arg.to_string_lossy();
    ps(false)
        .into_iter()
        .filter(|(_, cmdline)| has_arg(cmdline, &arg))
        .collect()
}

/// Every process's pid and command line (with its environment: `env`), from `ps`; none when
/// `ps` cannot run.
#[cfg(target_os = "macos")]
fn ps(env: bool) -> Vec<(i32, String)> {
    let all = if env { "-axEww" } else { "-axww" };
    let Ok(out) = std::process::Command::new("ps")
        .args([all, "-o", "pid=,command="])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (pid, rest) = line.trim_start().split_once(' ')?;
            Some((pid.parse().ok()?, rest.to_string()))
        })
        .collect()
}

/// Whether `cmdline` (arguments joined by spaces) has `arg`, which holds no space.
fn has_arg(cmdline: &str, arg: &str) -> bool {
    cmdline.split(' ').any(|a| a == arg)
}
