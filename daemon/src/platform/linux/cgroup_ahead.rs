//! The next process's cgroup, made ahead of its spawn: making a cgroup costs the kernel tens
//! of microseconds (more with controllers enabled, which each add files), and a spawn waiting
//! for it waits on the way to its reply. So once a process has ended and its cgroup has gone
//! (off the runtime, after its reply), the directory for the next id is made.
//!
//! Ids rise one by one, so the next spawn with a cgroup is most likely `last + 1`. One made for
//! an id that went another way (a session's command, which has no cgroup of its own) is removed
//! at the next chance. At most one such directory exists; like every per-process cgroup, it is
//! removed at shutdown, and by the next daemon's start-up should this one crash.

use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug)]
pub struct Ahead {
    /// `<parent>/cuba-exec-<instance>` in the v2 tree.
    base: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The id whose directory was made ahead and not yet taken.
    made: Option<u64>,
    /// The highest id a spawn has asked for.
    last: u64,
    /// The daemon is shutting down and removing its cgroups: a clean-up still running must not
    /// make one after that.
    closed: bool,
}

impl Ahead {
    pub fn new(base: PathBuf) -> Arc<Ahead> {
        Arc::new(Ahead {
            base,
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Two integers: a panic cannot leave them inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// At the spawn of `id`: whether its directory exists already (made ahead), now its own.
    pub fn take(&self, id: u64) -> bool {
        let mut s = self.lock();
        s.last = s.last.max(id);
        let ours = s.made == Some(id);
        if ours {
            s.made = None;
        }
        ours
    }

    /// From now on nothing is made ahead (at shutdown, before the cgroups are removed: a
    /// directory made before this returns is there for the removal to find).
    pub fn close(&self) {
        self.lock().closed = true;
    }

    /// Makes the directory of the id after the last one asked for, unless one is ready;
    /// removes one left for an id that has passed. Blocking: run off the runtime.
    pub fn make_next(&self) {
        let mut s = self.lock();
        if s.closed {
            return;
        }
        if let Some(stale) = s.made.filter(|&k| k <= s.last) {
            // Nobody took it (under this lock, a spawn would have): it is empty.
            if let Err(e) = fs::remove_dir(self.base.join(stale.to_string())) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::debug!("cannot remove the unused cgroup {stale}: {e}");
                }
            }
            s.made = None;
        }
        if s.made.is_some() {
            return;
        }
        let next = s.last + 1;
        match fs::create_dir(self.base.join(next.to_string())) {
            Ok(()) => s.made = Some(next),
            // Left by an earlier start (removed then, normally): empty, as no spawn had it.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => s.made = Some(next),
            Err(e) => tracing::debug!("cannot make the next cgroup ahead: {e}"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_next_id_is_made_ahead_and_a_passed_one_removed() {
        let dir = tempfile::tempdir().unwrap();
        let a = Ahead::new(dir.path().to_path_buf());
        assert!(!a.take(1), "nothing is made before a first spawn");
        a.make_next();
        assert!(dir.path().join("2").is_dir());
        a.make_next();
        assert!(!dir.path().join("3").exists(), "one ahead at most");
        assert!(a.take(2));
        assert!(!a.take(2), "taken once");
        a.make_next();
        assert!(dir.path().join("3").is_dir());
        // Id 3 went to something without a cgroup; 4 is spawned.
        assert!(!a.take(4));
        a.make_next();
        assert!(!dir.path().join("3").exists(), "the passed one is removed");
        assert!(dir.path().join("5").is_dir());
        // Shutting down: a clean-up that ends after the removal makes nothing.
        a.close();
        assert!(a.take(5));
        a.make_next();
        assert!(!dir.path().join("6").exists());
    }
}
