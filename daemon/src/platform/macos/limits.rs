//! Resource limits for every command (`config::Limits`) on macOS: the rlimits (CPU seconds, file
//! size, open files, address space) are set by the child itself with `setrlimit(2)` in a
//! `pre_exec` hook, as macOS has no `prlimit` to set them on another process. That closes the
//! window Linux has (the shell never runs unlimited) at the price of a fork instead of
//! posix_spawn for every spawn when limits are configured. There are no cgroups: `pids_max` and
//! `memory_max` stop the daemon at start-up (`platform::cgroup`).

use std::io;

use anyhow::{bail, Result};

use crate::base::config::{Limits, Rlimit};

/// The kernel resource for a limit.
fn resource(r: Rlimit) -> libc::c_int {
    match r {
        Rlimit::Cpu => libc::RLIMIT_CPU,
        Rlimit::FileSize => libc::RLIMIT_FSIZE,
        Rlimit::OpenFiles => libc::RLIMIT_NOFILE,
        Rlimit::AddressSpace => libc::RLIMIT_AS,
    }
}

/// The limits as the daemon applies them: checked at start-up.
#[derive(Debug, Default)]
pub struct Limiter {
    limits: Limits,
}

impl Limiter {
    /// Checks that every configured limit can be applied here. An error names what is missing
    /// and how to turn it off.
    pub fn setup(limits: &Limits) -> Result<Limiter> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        for (limit, value, name) in limits.rlimits() {
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit with a valid pointer to a local struct.
            if unsafe { libc::getrlimit(resource(limit), &mut cur) } != 0 {
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

    /// Whether any limit applies.
    pub fn is_active(&self) -> bool {
        !self.limits.rlimits().is_empty()
    }

    /// Adds the `pre_exec` hook that sets the rlimits (soft = hard, so the command cannot raise
    /// them) in the child before it execs; a limit that cannot be set fails the spawn.
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
        assert!(!Limiter::setup(&Limits::default()).unwrap().is_active());
    }
}
