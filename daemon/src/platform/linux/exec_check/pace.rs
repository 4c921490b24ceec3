//! How the checking thread is scheduled: by what its callers do (one at a time, or a
//! parallel build).

use std::time::{Duration, Instant};

/// How the thread is scheduled, by what its callers do.
///
/// One caller at a time (a shell running commands one after another, a test runner): the
/// lowest realtime priority, where the daemon may (root, or an `RLIMIT_RTPRIO` above 0), and
/// wake-ups on the current CPU. A caller's exec then wakes this thread on the caller's own CPU,
/// which its wait leaves free, and is answered before anything else runs there; the answer's
/// wake-up of the caller cannot preempt the thread before it is back in `epoll_wait`.
/// Otherwise the thread would stay runnable on the caller's CPU and the wake-ups that follow
/// would go to an idle CPU: on a virtual machine that costs more than the check itself.
///
/// Several callers at once (a parallel build): the fair scheduler with a short time slice, and
/// the wake-ups where the scheduler puts them. Wake-ups on the current CPU would gather the
/// build's processes on one CPU, and a realtime thread waking on a busy one takes it from
/// them. The thread's work per exec is bounded either way (nothing in it waits for another
/// process), and `SCHED_RESET_ON_FORK` keeps the priority from anything it could start.
pub struct Pace {
    /// The realtime priority is granted here.
    realtime: bool,
    /// Callers overlap now.
    parallel: bool,
    /// The last caller and when it was answered.
    last: Option<(i32, Instant)>,
    /// When callers last overlapped.
    overlapped: Option<Instant>,
}

/// Callers answered this close together overlap when the first is still alive.
const OVERLAP: Duration = Duration::from_millis(5);
/// How long after the last overlap the thread goes back to the one-caller pace.
const CALM: Duration = Duration::from_millis(100);

impl Pace {
    pub fn new() -> Pace {
        let mut p = Pace {
            realtime: false,
            parallel: true,
            last: None,
            overlapped: None,
        };
        p.realtime = p.schedule(false);
        p.parallel = !p.realtime;
        p
    }

    /// Sets the thread's policy: realtime (`true` where granted), else the short slice.
    fn schedule(&self, parallel: bool) -> bool {
        if !parallel {
            let param = libc::sched_param { sched_priority: 1 };
            let policy = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
            // SAFETY: sets this thread's policy; the parameter lives across the call.
            if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
                return true;
            }
        }
        /// `struct sched_attr` (its first version: enough for a fair task's slice).
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            policy: u32,
            flags: u64,
            nice: i32,
            priority: u32,
            runtime: u64,
            deadline: u64,
            period: u64,
        }
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_OTHER as u32,
            flags: libc::SCHED_FLAG_RESET_ON_FORK as u64,
            nice: 0,
            priority: 0,
            // The shortest slice the kernel takes (Linux 6.12; older ones ignore it): 0.1 ms.
            runtime: 100_000,
            deadline: 0,
            period: 0,
        };
        // SAFETY: sched_setattr reads `attr`, whose size field says how much.
        unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
        false
    }

    /// A notification from `pid`: whether its listener should ask for wake-ups on the
    /// current CPU, after the thread's policy follows what the callers do.
    pub fn caller(&mut self, pid: i32) -> bool {
        if !self.realtime {
            return false;
        }
        let now = Instant::now();
        // SAFETY: signal 0 only asks whether the process exists.
        let overlaps = self.last.is_some_and(|(p, at)| {
            p != pid && now.duration_since(at) < OVERLAP && unsafe { libc::kill(p, 0) } == 0
        });
        self.last = Some((pid, now));
        if overlaps {
            self.overlapped = Some(now);
        }
        let parallel = self
            .overlapped
            .is_some_and(|t| now.duration_since(t) < CALM);
        if parallel != self.parallel {
            self.parallel = parallel;
            self.schedule(parallel);
            tracing::debug!(parallel, "exec checks: callers changed pace");
        }
        !parallel
    }
}
