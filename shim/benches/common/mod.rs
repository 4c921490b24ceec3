//! What the MCP benches share: a child stopped in order when dropped, and medians.

use std::process::Child;
use std::time::{Duration, Instant};

/// A child process stopped when dropped: SIGTERM (a daemon stops its processes and removes its
/// cgroups), SIGKILL only if it has not gone within 10 s.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(10);
        while matches!(self.0.try_wait(), Ok(None)) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
