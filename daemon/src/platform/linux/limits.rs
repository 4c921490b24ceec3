//! Resource limits for every command (`config::Limits`): rlimits (CPU seconds, file size, open
//! files, address space) set with `prlimit(2)` on the child's pid right after the spawn, and
//! `pids.max` / `memory.max` in a per-process cgroup v2
//! (`<daemon cgroup>/cuba-exec-<instance>/<id>`).
//!
//! No `pre_exec` hook: the fast posix_spawn path stays. The price is a short window between the
//! shell's `exec` and the `prlimit` / cgroup move, in which the shell runs unlimited (see
//! docs/decisions.md). Limits that are configured but cannot be applied stop the daemon at
//! start-up; a spawn whose limits fail is killed and recorded as `failed_to_start`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::config::{Limits, Rlimit};

/// The kernel resource for a limit.
fn resource(r: Rlimit) -> libc::__rlimit_resource_t {
    match r {
        Rlimit::Cpu => libc::RLIMIT_CPU,
        Rlimit::FileSize => libc::RLIMIT_FSIZE,
        Rlimit::OpenFiles => libc::RLIMIT_NOFILE,
        Rlimit::AddressSpace => libc::RLIMIT_AS,
    }
}

/// The limits as the daemon applies them: checked at start-up, with the cgroup tree made.
#[derive(Debug, Default)]
pub struct Limiter {
    limits: Limits,
    /// `<daemon cgroup>/cuba-exec-<instance>`, when cgroup limits are configured.
    cgroup: Option<PathBuf>,
}

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

impl Limiter {
    /// Checks that every configured limit can be applied here; creates the cgroup tree for
    /// `pids_max` / `memory_max`. An error names what is missing and how to turn it off.
    pub fn setup(limits: &Limits, instance: &str) -> Result<Limiter> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        for (limit, value, name) in limits.rlimits() {
            let resource = resource(limit);
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit with a valid pointer to a local struct.
            if unsafe { libc::getrlimit(resource, &mut cur) } != 0 {
                bail!("{name}: getrlimit failed: {}", io::Error::last_os_error());
            }
            if !root && cur.rlim_max != libc::RLIM_INFINITY && value > cur.rlim_max {
                bail!(
                    "{name}={value} is above the daemon's hard limit ({}); an unprivileged \
                     cubad can only lower limits",
                    cur.rlim_max
                );
            }
        }
        let cgroup = if limits.wants_cgroup() {
            Some(setup_cgroup(limits, instance).context(
                "pids_max / memory_max need a writable cgroup v2 tree (CUBA_EXEC_PIDS_MAX, \
                 CUBA_EXEC_MEMORY_MAX); unset them, or run cubad in a delegated cgroup \
                 (e.g. `systemd-run --user -p Delegate=yes cubad`)",
            )?)
        } else {
            None
        };
        Ok(Limiter {
            limits: limits.clone(),
            cgroup,
        })
    }

    /// Whether any limit applies (a spawn then has work to do after it starts).
    pub fn is_active(&self) -> bool {
        !self.limits.is_empty()
    }

    /// Nothing to add to the command: the limits are applied after the spawn ([`Limiter::apply`]),
    /// so std keeps its posix_spawn path.
    pub fn install(&self, _cmd: &mut std::process::Command) {}

    /// Applies the limits to the just-spawned process `pid` (process `id`). On failure the
    /// caller kills the child: it must not run without its limits.
    pub fn apply(&self, id: u64, pid: i32) -> Result<(), String> {
        for (limit, value, name) in self.limits.rlimits() {
            let resource = resource(limit);
            let lim = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: prlimit(2) on our child's pid with a valid pointer to a local struct and
            // no old-value pointer.
            if unsafe { libc::prlimit(pid, resource, &lim, std::ptr::null_mut()) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ESRCH) {
                    return Ok(()); // Already gone: nothing left to limit.
                }
                return Err(format!("cannot apply {name}={value}: {e}"));
            }
        }
        if let Some(base) = &self.cgroup {
            let dir = base.join(id.to_string());
            create_cgroup(&dir, &self.limits)
                .and_then(|()| write(&dir.join("cgroup.procs"), &pid.to_string()))
                .or_else(|e| match e.raw_os_error() {
                    Some(libc::ESRCH) => Ok(()),
                    _ => Err(e),
                })
                .map_err(|e| format!("cannot put the process in cgroup {}: {e}", dir.display()))?;
        }
        Ok(())
    }

    /// Removes process `id`'s cgroup, once it is reaped.
    pub fn release(&self, id: u64) {
        let Some(base) = &self.cgroup else { return };
        let dir = base.join(id.to_string());
        if let Err(e) = fs::remove_dir(&dir) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!("cannot remove cgroup {}: {e}", dir.display());
            }
        }
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value)
}

/// `mkdir` (fine if it exists) and the per-process limit files.
fn create_cgroup(dir: &Path, limits: &Limits) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if let Some(n) = limits.pids_max {
        write(&dir.join("pids.max"), &n.to_string())?;
    }
    if let Some(n) = limits.memory_max {
        write(&dir.join("memory.max"), &n.to_string())?;
    }
    Ok(())
}

/// The daemon's own cgroup v2 path, from the `0::/path` line of `/proc/self/cgroup`.
fn own_cgroup() -> Result<PathBuf> {
    let text = fs::read_to_string("/proc/self/cgroup").context("cannot read /proc/self/cgroup")?;
    let rel = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .context("/proc/self/cgroup has no cgroup v2 entry (0::)")?;
    Ok(Path::new(CGROUP_ROOT).join(rel.trim().trim_start_matches('/')))
}

/// Enables `controllers` (e.g. `pids`) for the children of `dir`, when not already enabled.
fn enable(dir: &Path, controllers: &[&str]) -> Result<()> {
    let control = dir.join("cgroup.subtree_control");
    let current = fs::read_to_string(&control)
        .with_context(|| format!("cannot read {}", control.display()))?;
    let have: Vec<&str> = current.split_whitespace().collect();
    for c in controllers {
        if !have.contains(c) {
            write(&control, &format!("+{c}")).with_context(|| {
                format!(
                    "cannot enable the {c} controller in {} (a cgroup with processes of its \
                     own cannot delegate controllers, and it must be writable)",
                    control.display()
                )
            })?;
        }
    }
    Ok(())
}

fn setup_cgroup(limits: &Limits, instance: &str) -> Result<PathBuf> {
    let controllers_file = Path::new(CGROUP_ROOT).join("cgroup.controllers");
    if !controllers_file.is_file() {
        bail!("cgroup v2 is not mounted at {CGROUP_ROOT} (no cgroup.controllers)");
    }
    let own = own_cgroup()?;
    let mut wanted = Vec::new();
    if limits.pids_max.is_some() {
        wanted.push("pids");
    }
    if limits.memory_max.is_some() {
        wanted.push("memory");
    }
    let available = fs::read_to_string(own.join("cgroup.controllers"))
        .with_context(|| format!("cannot read the daemon's cgroup {}", own.display()))?;
    if let Some(c) = wanted
        .iter()
        .find(|c| !available.split_whitespace().any(|a| a == **c))
    {
        bail!(
            "the {c} controller is not available in the daemon's cgroup {}",
            own.display()
        );
    }
    enable(&own, &wanted)?;
    let base = own.join(format!("cuba-exec-{instance}"));
    match fs::create_dir(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => remove_stale(&base),
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", base.display())),
    }
    enable(&base, &wanted)?;
    // A trial child cgroup: the limit files must be there and writable.
    let probe = base.join("probe");
    let made = create_cgroup(&probe, limits);
    let _ = fs::remove_dir(&probe);
    made.with_context(|| format!("cannot create a child cgroup under {}", base.display()))?;
    Ok(base)
}

/// Empty per-process cgroups left by an earlier daemon of this state dir.
fn remove_stale(base: &Path) {
    if let Ok(entries) = fs::read_dir(base) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                let _ = fs::remove_dir(e.path());
            }
        }
    }
}

/// `cgroup v2` limits can be tested here: the tree exists and our cgroup is writable.
#[cfg(test)]
fn cgroup_v2_writable() -> bool {
    Path::new(CGROUP_ROOT).join("cgroup.controllers").is_file()
        && own_cgroup()
            .map(|p| {
                let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok();
                // SAFETY: access(2) on a NUL-terminated path.
                c.is_some_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0)
            })
            .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn no_limits_need_nothing() {
        let l = Limiter::setup(&Limits::default(), "x").unwrap();
        assert!(l.cgroup.is_none());
        assert!(Limits::default().is_empty());
    }

    #[test]
    fn cgroup_limits_without_a_v2_tree_fail_at_setup() {
        if cgroup_v2_writable() {
            eprintln!("note: cgroup v2 is writable here; the failure path is not exercised");
            return;
        }
        let limits = Limits {
            pids_max: Some(5),
            ..Limits::default()
        };
        let err = Limiter::setup(&limits, "x").unwrap_err();
        assert!(format!("{err:#}").contains("CUBA_EXEC_PIDS_MAX"), "{err:#}");
    }
}
