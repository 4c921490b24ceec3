//! The rlimits of every command (`config::Limits`: CPU seconds, file size, open files, address
//! space), set by the child itself before its exec (a hook of the spawn), so the command never
//! runs without them. `pids_max` and `memory_max` are the per-process cgroup's
//! (`platform::cgroup`). Limits that are configured but cannot be applied stop the daemon at
//! start-up; a spawn whose limits fail is recorded as `failed_to_start`.

use std::io;

use anyhow::{bail, Result};

use crate::base::config::{Limits, Rlimit};

/// The kernel resource for a limit.
fn resource(r: Rlimit) -> libc::__rlimit_resource_t {
    match r {
        Rlimit::Cpu => libc::RLIMIT_CPU,
        Rlimit::FileSize => libc::RLIMIT_FSIZE,
        Rlimit::OpenFiles => libc::RLIMIT_NOFILE,
        Rlimit::AddressSpace => libc::RLIMIT_AS,
    }
}

/// The rlimits as the daemon applies them: checked at start-up.
#[derive(Debug, Default)]
pub struct Limiter {
    limits: Limits,
}

impl Limiter {
    /// Checks that every configured rlimit can be applied here. An error names what is missing
    /// and how to turn it off.
    pub fn setup(limits: &Limits) -> Result<Limiter> {
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
        Ok(Limiter {
            limits: limits.clone(),
        })
    }

    /// Whether any rlimit applies (a spawn then has work to do after it starts).
    pub fn is_active(&self) -> bool {
        !self.limits.rlimits().is_empty()
    }

    /// Adds the hook that sets the rlimits in the child before it execs.
    pub fn install(&self, cmd: &mut crate::platform::spawn::Spawn) {
        crate::platform::posix::install_rlimits(cmd, &self.limits, resource, libc::setrlimit);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn no_limits_need_nothing() {
        let l = Limiter::setup(&Limits::default()).unwrap();
        assert!(!l.is_active());
        assert!(Limits::default().is_empty());
    }
}
