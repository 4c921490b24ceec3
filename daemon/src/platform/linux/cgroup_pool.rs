//! The per-process v2 cgroups, kept for the next process once empty. The first process the
//! kernel places in a cgroup it has just made costs it 100–150 µs more than one placed in a
//! cgroup that has held processes before (measured in docs/decisions.md), and that is on the
//! way to every reply. So a process that has ended and left its cgroup empty gives it back, and
//! the next spawn takes it; only when none is free is one made on the spawn's path. One that was
//! emptied by `cgroup.kill` is not kept: the kernel kills every child later born in it.
//!
//! A reused cgroup's `cpu.stat` counts what every earlier process ran: its `usage_usec` when it
//! comes back is kept with it, and a process's CPU time is the difference. Memory figures cannot
//! be kept apart that way (`memory.peak` is the cgroup's all-time peak, and page cache charged to
//! it stays there), so where the v2 memory controller is on nothing is reused: a spare cgroup is
//! made ahead instead, off the reply's path, the next process's start paying only the kernel's
//! first placement.
//!
//! A free cgroup keeps, like a process's, its directory, `cgroup.events` and `cpu.stat` open
//! (`Files`): a spawn from the pool opens nothing, and a cgroup goes back on the runtime's
//! thread, two `pread`s and a lock, right after the exit's reply (no hand-over to a blocking thread, whose wake-up would compete with the reply's
//! delivery on a small machine). Only a removal (`rmdir` waits for the kernel) goes off the
//! runtime.
//!
//! Cgroups are named by a counter, not by process id (cgroup v2 cannot rename a directory): a
//! process's record keeps its slot, and an in-place upgrade hands it over. At most [`FREE_MAX`]
//! wait, empty; like every per-process cgroup they go at shutdown, and by the next daemon's
//! start-up should this one crash.

use std::collections::VecDeque;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use super::cgroup_files::{cpu_usage_us, populated, remove_dir, Files};

pub use crate::platform::posix::CgroupSlot as Slot;

/// Empty cgroups kept: as many as processes usually end together, so a burst of short
/// commands from parallel tool calls keeps reusing them.
pub const FREE_MAX: usize = 16;

#[derive(Debug)]
pub struct Pool {
    /// `<parent>/cuba-exec-<instance>` in the v2 tree.
    base: PathBuf,
    /// Empty cgroups may be given to the next process (no v2 memory controller).
    reuse: bool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Empty cgroups ready for a spawn, the longest free first.
    free: VecDeque<Free>,
    /// The next directory name.
    next: u64,
    /// The daemon is shutting down and removing its cgroups: a clean-up still running must
    /// neither keep nor make one after that.
    closed: bool,
}

#[derive(Debug)]
struct Free {
    slot: Slot,
    /// It has held a process: its limits are written already.
    configured: bool,
    files: Option<Arc<Files>>,
}

/// A cgroup given to a spawn.
#[derive(Debug)]
pub struct Taken {
    pub slot: Slot,
    /// The directory exists (free or made ahead): only a new one must be made.
    pub exists: bool,
    /// Its limits were written for an earlier process (they are the daemon's, the same).
    pub configured: bool,
    /// Its directory and files, open already (a free one's).
    pub files: Option<Arc<Files>>,
}

impl Pool {
    /// The pool of `base`, whose directories up to `after` (what start-up left there: a
    /// handed-over process's) are taken.
    pub fn new(base: PathBuf, reuse: bool, after: u64) -> Arc<Pool> {
        Arc::new(Pool {
            base,
            reuse,
            state: Mutex::new(State {
                free: VecDeque::new(),
                next: after + 1,
                closed: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain data: a panic cannot leave it inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn dir(&self, leaf: u64) -> PathBuf {
        self.base.join(leaf.to_string())
    }

    /// A name for a cgroup made elsewhere (an agent's process's, under its agent's cgroup):
    /// from the same counter, so an upgrade finds every process's by its leaf alone.
    pub fn next_leaf(&self) -> u64 {
        let mut s = self.lock();
        s.next += 1;
        s.next - 1
    }

    /// A cgroup for the next spawn: a free one, or the name of one to make.
    pub fn take(&self) -> Taken {
        let mut s = self.lock();
        if let Some(f) = s.free.pop_front() {
            return Taken {
                slot: f.slot,
                exists: true,
                configured: f.configured,
                files: f.files,
            };
        }
        let leaf = s.next;
        s.next += 1;
        Taken {
            slot: Slot {
                leaf,
                cpu_base_us: 0,
            },
            exists: false,
            configured: false,
            files: None,
        }
    }

    /// The process in cgroup `leaf` (its `files` open, if they are) has ended and its output
    /// is in: the cgroup is kept for the next one if there is reuse, it is empty and there is
    /// room. Whether it was. Does not block (two `pread`s, or where the files are not open a
    /// read of each by name and their opening): for the runtime's thread.
    pub fn keep(&self, leaf: u64, files: Option<&Arc<Files>>) -> bool {
        if !self.reuse {
            return false;
        }
        let dir = self.dir(leaf);
        // Read and opened before the lock: a spawn must not wait for a file read.
        let (base, empty) = match files {
            Some(f) => (f.cpu_usage_us(), f.populated() == Some(false)),
            None => (cpu_usage_us(&dir), !populated(&dir)),
        };
        let Some(cpu_base_us) = base.filter(|_| empty) else {
            return false;
        };
        let files = files
            .cloned()
            .or_else(|| Files::open(&dir).ok().map(Arc::new));
        let mut s = self.lock();
        if s.closed || s.free.len() >= FREE_MAX {
            return false;
        }
        s.free.push_back(Free {
            slot: Slot { leaf, cpu_base_us },
            configured: true,
            files,
        });
        true
    }

    /// The process in cgroup `leaf` has ended and its output is in: the cgroup is kept for the
    /// next one if it is `reusable` (never killed) and [`Pool::keep`] keeps it, else removed
    /// (and, without reuse, a spare made ahead). Blocking: run off the runtime.
    pub fn release(&self, leaf: u64, reusable: bool, files: Option<&Arc<Files>>) {
        if reusable && self.keep(leaf, files) {
            return;
        }
        if !self.reuse {
            self.make_spare();
        }
        remove_dir(&self.dir(leaf));
    }

    /// Without reuse: one empty cgroup made ahead for the next spawn, unless there is one.
    /// With reuse: a first one at start-up. Blocking: run off the runtime.
    pub fn make_spare(&self) {
        let leaf = {
            let mut s = self.lock();
            if s.closed || !s.free.is_empty() {
                return;
            }
            s.next += 1;
            s.next - 1
        };
        // Made and opened outside the lock: a spawn must not wait for it.
        let dir = self.dir(leaf);
        if let Err(e) = fs::create_dir(&dir) {
            tracing::debug!("cannot make a spare cgroup: {e}");
            return;
        }
        let files = Files::open(&dir).ok().map(Arc::new);
        let mut s = self.lock();
        if s.closed {
            drop(s);
            remove_dir(&dir);
            return;
        }
        s.free.push_back(Free {
            slot: Slot {
                leaf,
                cpu_base_us: 0,
            },
            configured: false,
            files,
        });
    }

    /// From now on nothing is kept or made (at shutdown, before the cgroups are removed: one
    /// kept before this returns is there for the removal to find).
    pub fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.free.clear();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A plain directory stands in for the cgroup here: no `cpu.stat`, so nothing is kept
    /// with reuse (the real tree is tested in `cgroup.rs` and `tests/tests/e2e/cgroups.rs`).
    #[test]
    fn without_reuse_a_spare_is_made_ahead_and_a_used_one_removed() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::new(dir.path().to_path_buf(), false, 4);
        let t = pool.take();
        assert_eq!(
            (t.slot.leaf, t.exists),
            (5, false),
            "names go on after the kept"
        );
        fs::create_dir(pool.dir(5)).unwrap();
        pool.release(5, true, None);
        assert!(!pool.dir(5).exists(), "the used one goes");
        assert!(pool.dir(6).is_dir(), "a spare is made ahead");
        pool.make_spare();
        assert!(!pool.dir(7).exists(), "one spare at most");
        let t = pool.take();
        assert_eq!((t.slot.leaf, t.exists, t.configured), (6, true, false));
        pool.close();
        fs::create_dir(pool.dir(8)).unwrap();
        pool.release(8, true, None);
        assert!(!pool.dir(9).exists(), "nothing is made once closed");
    }

    #[test]
    fn with_reuse_a_directory_that_cannot_be_read_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::new(dir.path().to_path_buf(), true, 0);
        fs::create_dir(pool.dir(1)).unwrap();
        pool.release(1, true, None);
        assert!(!pool.dir(1).exists());
        assert!(!pool.take().exists);
    }
}
