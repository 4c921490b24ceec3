//! Removing the cgroups a test daemon made (`cuba-exec-<instance>` in the cgroup v2 tree and in
//! the v1 `pids`, `memory` and `cpu` hierarchies, with the agents' cgroups in them), so killed
//! daemons leave nothing in the machine's tree.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Kills what is left in instance `instance`'s cgroups and removes them.
pub fn remove_instance(instance: &str) {
    let name = format!("cuba-exec-{instance}");
    for base in bases(&name) {
        remove_tree(&base);
    }
}

/// As [`remove_instance`], for the daemon whose state dir is `state` (its `instance` file).
pub fn remove_instance_of(state: &Path) {
    if let Ok(instance) = fs::read_to_string(state.join("instance")) {
        remove_instance(instance.trim());
    }
}

/// Kills (`cgroup.kill`, v2) what is in `base`'s cgroups, however deep (an agent's hold its
/// processes'), and removes them and it.
pub fn remove_tree(base: &Path) {
    if !base.is_dir() {
        return;
    }
    let _ = fs::write(base.join("cgroup.kill"), "1");
    for _ in 0..50 {
        for e in fs::read_dir(base).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                remove_tree(&e.path());
            }
        }
        if fs::remove_dir(base).is_ok() || !base.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The v2 cgroup process `pid` is in: its `0::` line of `/proc/<pid>/cgroup`, under the v2
/// tree's mount.
pub fn v2_of(pid: i32) -> Option<PathBuf> {
    let own = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let point = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split(' ').next() == Some("cgroup2")).then(|| left.split(' ').nth(4))?
    })?;
    Some(Path::new(point).join(rel.trim().trim_start_matches('/')))
}

/// Whether cgroup `dir` holds a process (`populated 1` in its `cgroup.events`); a cgroup
/// that is gone holds none.
pub fn populated(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.events"))
        .unwrap_or_default()
        .lines()
        .any(|l| l.trim() == "populated 1")
}

/// `<mount><this process's cgroup>/<name>` for the v2 tree and the v1 pids and memory
/// hierarchies (a test's daemon starts in the test's cgroups).
fn bases(name: &str) -> Vec<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut out = Vec::new();
    for line in mounts.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let (Some(point), mut r) = (left.split(' ').nth(4), right.split(' ')) else {
            continue;
        };
        let fstype = r.next().unwrap_or_default();
        let options = r.nth(1).unwrap_or_default();
        let tag = match fstype {
            "cgroup2" => "0::".to_string(),
            "cgroup" => match ["pids", "memory", "cpu"]
                .into_iter()
                .find(|c| options.split(',').any(|o| o == *c))
            {
                Some(c) => c.to_string(),
                None => continue,
            },
            _ => continue,
        };
        // `N:CONTROLLERS:PATH`; a v1 hierarchy may hold several (`cpu,cpuacct`).
        let rel = own.lines().find_map(|l| match tag.as_str() {
            "0::" => l.strip_prefix("0::"),
            c => {
                let mut parts = l.splitn(3, ':');
                let controllers = parts.nth(1)?;
                controllers
                    .split(',')
                    .any(|x| x == c)
                    .then(|| parts.next())?
            }
        });
        if let Some(rel) = rel {
            let dir = Path::new(point).join(rel.trim().trim_start_matches('/'));
            out.push(dir.join(name));
        }
    }
    out
}
