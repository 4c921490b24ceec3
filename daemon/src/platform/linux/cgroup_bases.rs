//! Where a daemon's cgroups live: the v2 base `<parent>/cuba-exec-<instance>` (the daemon moved
//! to a leaf beside it where v2's "no internal processes" rule asks), the v1 bases of the
//! controllers v2 lacks, and their removal with what is under them.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::cgroup_budget::is_agent_dir;
use super::cgroup_files::{mounts, own_path, read, v2_mount};
use super::cgroup_leftovers::{kept, remove_leftovers};
use super::cgroup_proc::empty_now;
use crate::base::config::CgroupMode;

/// The v2 base for `mode`, made and emptied of leftovers; an error says why there is none.
pub(super) fn v2_base(
    mode: &CgroupMode,
    name: &str,
    instance: &str,
    keep: &HashSet<u64>,
) -> Result<PathBuf> {
    let parent = match mode {
        CgroupMode::Off => bail!("cgroups are off (CUBA_EXEC_CGROUPS=off)"),
        CgroupMode::Parent(p) => {
            if !p.join("cgroup.procs").is_file() {
                bail!(
                    "cgroup_parent {} is not a cgroup v2 directory (CUBA_EXEC_CGROUP_PARENT)",
                    p.display()
                );
            }
            p.clone()
        }
        CgroupMode::Auto | CgroupMode::On => {
            let mount = v2_mount()?;
            let own = own_path(&mount, "0::")?;
            // A daemon that moved itself to its leaf (see `enable`) keeps the same base.
            match own.file_name() {
                Some(n) if n.to_string_lossy() == leaf_name(instance) => {
                    own.parent().map(Path::to_path_buf).unwrap_or(own)
                }
                _ => own,
            }
        }
    };
    let base = parent.join(name);
    match fs::create_dir(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => remove_leftovers(&base, keep),
        Err(e) => bail!("cannot create {}: {e}", base.display()),
    }
    Ok(base)
}

fn leaf_name(instance: &str) -> String {
    format!("cubad-{instance}")
}

/// Enables `controller` in `parent` and `base` for the per-process cgroups. When `parent` has
/// processes (EBUSY: v2's "no internal processes" rule) the daemon moves itself to its leaf
/// `<parent>/cubad-<instance>` and tries again; other processes of that cgroup are not ours to
/// move, and then the controller is not used from v2.
pub(super) fn enable(
    parent: &Path,
    base: &Path,
    controller: &str,
    instance: &str,
) -> io::Result<()> {
    let add = |dir: &Path| {
        let control = dir.join("cgroup.subtree_control");
        let have = read(&control)?;
        if have.split_whitespace().any(|c| c == controller) {
            return Ok(());
        }
        fs::write(&control, format!("+{controller}"))
    };
    match add(parent) {
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            let leaf = parent.join(leaf_name(instance));
            match fs::create_dir(&leaf) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())?;
            add(parent)?;
        }
        r => r?,
    }
    add(base)
}

/// The v1 base for `controller`: its hierarchy's mount, the daemon's cgroup in it, and
/// `cuba-exec-<instance>` made (leftovers removed).
pub(super) fn v1_base(controller: &str, name: &str, keep: &HashSet<u64>) -> Result<PathBuf> {
    let base = v1_path(controller, name)?;
    match fs::create_dir(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => clean_v1(&base, keep),
        Err(e) => bail!("cannot create {}: {e}", base.display()),
    }
    Ok(base)
}

/// At start-up, the v1 bases of `name` an earlier daemon left in hierarchies this one does not
/// use yet (a budget's `cpu`, made on first use): emptied and removed, but for what handed-over
/// processes hold.
pub(super) fn sweep_v1(name: &str, keep: &HashSet<u64>) {
    for controller in ["cpu", "memory", "pids"] {
        let Ok(base) = v1_path(controller, name) else {
            continue;
        };
        if base.is_dir() {
            clean_v1(&base, keep);
            let _ = fs::remove_dir(&base);
        }
    }
}

/// `<v1 mount of controller><the daemon's cgroup there>/<name>`.
fn v1_path(controller: &str, name: &str) -> Result<PathBuf> {
    let mount = mounts()?
        .into_iter()
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == controller))
        .map(|m| m.point)
        .with_context(|| format!("no cgroup v1 {controller} hierarchy is mounted"))?;
    Ok(own_path(&mount, &format!(":{controller}:"))?.join(name))
}

/// What an earlier daemon left in v1 base `base` goes, but for `keep`'s (and what still holds
/// a process: the kernel refuses to remove it).
fn clean_v1(base: &Path, keep: &HashSet<u64>) {
    for e in fs::read_dir(base).into_iter().flatten().flatten() {
        if kept(&e.path(), keep) {
            continue;
        }
        if is_agent_dir(&e.path()) {
            for inner in fs::read_dir(e.path()).into_iter().flatten().flatten() {
                if !kept(&inner.path(), keep) {
                    let _ = fs::remove_dir(inner.path());
                }
            }
        }
        let _ = fs::remove_dir(e.path());
    }
}

/// The per-process cgroups under `base` go, and the agents' cgroups with theirs.
pub(super) fn remove_below(base: &Path) {
    for e in fs::read_dir(base).into_iter().flatten().flatten() {
        let dir = e.path();
        if !dir.is_dir() {
            continue;
        }
        if is_agent_dir(&dir) {
            remove_below(&dir);
        } else {
            // A process stopped just now can hold its cgroup a moment after it was reaped
            // (the kernel unlinks it after its last switch): waited for, bounded.
            empty_now(&dir);
        }
        let _ = fs::remove_dir(&dir);
    }
}
