//! A running tree's recent CPU use from its cgroup's CPU time, which the daemon reads on every
//! look at a row anyway: the rate since the previous look, so that `ps` needs no second sample
//! (and no wait between two) to show it.

use std::time::{Duration, Instant};

/// Looks closer together than this keep the last rate: CPU time counts in milliseconds here,
/// and a rate over a few of them would swing between 0 and 100 %.
pub const WINDOW: Duration = Duration::from_millis(500);

/// The last look at a running process's cgroup, kept beside its record (`Proc`): reading a row
/// writes this, never the record. (Unix: the Windows daemon has a table of its own.)
#[derive(Default)]
pub struct Reading {
    /// Its CPU time at the last look: the recent rate in its row.
    pub cpu: CpuRate,
    /// Its cgroup's figures as last read, when, and the CPU rate then: what a listing shows
    /// again within [`WINDOW`].
    pub usage: Option<(Instant, crate::platform::cgroup::Usage, Option<u32>)>,
}

/// The previous look: when, the CPU time then, and the rate it gave.
#[derive(Default)]
pub struct CpuRate {
    last: Option<(Instant, u64, u32)>,
}

impl CpuRate {
    /// The rate in thousandths of a core at `now`, with `cpu_ms` of CPU time used in all over
    /// `ran` of running: since the previous look (at least [`WINDOW`] before), or on the first
    /// look, since the start.
    pub fn look(&mut self, now: Instant, cpu_ms: u64, ran: Duration) -> u32 {
        let (since, spent) = match self.last {
            Some((at, _, rate)) if now.saturating_duration_since(at) < WINDOW => return rate,
            Some((at, before, _)) => (
                now.saturating_duration_since(at),
                cpu_ms.saturating_sub(before),
            ),
            None => (ran, cpu_ms),
        };
        let rate = match since.as_millis() {
            0 => 0,
            ms => u32::try_from(u128::from(spent) * 1000 / ms).unwrap_or(u32::MAX),
        };
        self.last = Some((now, cpu_ms, rate));
        rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_look_is_the_average_since_the_start_then_each_window_its_own() {
        let t0 = Instant::now();
        let mut r = CpuRate::default();
        // 3 s of CPU over 4 s of running: 0.75 of a core.
        assert_eq!(r.look(t0, 3000, Duration::from_secs(4)), 750);
        // Too soon: the same rate, and the window still starts at the first look.
        assert_eq!(
            r.look(t0 + Duration::from_millis(100), 3090, Duration::ZERO),
            750
        );
        // A second later, 2 s of CPU more: two cores busy.
        assert_eq!(
            r.look(t0 + Duration::from_secs(1), 5000, Duration::ZERO),
            2000
        );
        // Idle since.
        assert_eq!(r.look(t0 + Duration::from_secs(3), 5000, Duration::ZERO), 0);
    }

    #[test]
    fn a_process_looked_at_as_it_starts_has_no_rate_to_divide_by() {
        let mut r = CpuRate::default();
        assert_eq!(r.look(Instant::now(), 0, Duration::ZERO), 0);
        // A CPU time going back (a counter reset) is no negative rate.
        let t = Instant::now() + WINDOW;
        assert_eq!(r.look(t, 0, Duration::ZERO), 0);
    }
}
