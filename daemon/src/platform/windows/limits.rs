//! Resource limits for every command (`config::Limits`) on Windows: there are no POSIX rlimits
//! (CPU seconds, file size, open files, address space), so configuring one stops the daemon at
//! start-up; `pids_max` and `memory_max` are the command's Job Object's limits
//! (`platform::cgroup`).

use anyhow::{bail, Result};

use crate::base::config::Limits;

/// The limits as the daemon applies them: none here beyond the job's.
#[derive(Debug, Default)]
pub struct Limiter;

impl Limiter {
    /// Refuses the rlimits, which Windows does not have; an error names them and what works.
    pub fn setup(limits: &Limits) -> Result<Limiter> {
        let names: Vec<&str> = limits
            .rlimits()
            .into_iter()
            .map(|(_, _, name)| name)
            .collect();
        let (what, it) = match names.as_slice() {
            [] => return Ok(Limiter),
            [one] => (format!("{one} is a POSIX rlimit"), "it"),
            many => (format!("{} are POSIX rlimits", many.join(", ")), "them"),
        };
        bail!(
            "{what}, which Windows does not have; unset {it} (pids_max and memory_max work, \
             through the command's Job Object)"
        );
    }

    /// Never: no rlimit applies here.
    pub fn is_active(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rlimits_are_refused_and_the_job_limits_are_not() {
        let job_only = Limits {
            pids_max: Some(5),
            memory_max: Some(1 << 30),
            ..Limits::default()
        };
        assert!(!Limiter::setup(&job_only).expect("setup").is_active());
        let rlimit = Limits {
            cpu_seconds: Some(5),
            ..Limits::default()
        };
        let Err(e) = Limiter::setup(&rlimit) else {
            panic!("an rlimit must be refused")
        };
        assert!(e.to_string().contains("POSIX rlimit"), "{e}");
    }
}
