//! Sleeping until a followed file may have changed: it grew, was renamed or removed, or a file
//! appeared in (or left) its directory. A wake-up only says "look again"; the caller checks.
//!
//! The system provides (`os::watch`): `Watcher` with `new(dir)`, `add_file(path) ->
//! Option<FileWatch>`, `remove(FileWatch)` and `wait(limit)`.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::os;

/// Watches one directory, and files in it added with [`Watcher::add_file`].
pub struct Watcher(os::watch::Watcher);

/// One watched file, until [`Watcher::remove`].
pub struct FileWatch(os::watch::FileWatch);

impl Watcher {
    /// Watches `dir` for files created in it or renamed into or out of it.
    pub fn new(dir: &Path) -> Result<Watcher> {
        os::watch::Watcher::new(dir).map(Watcher)
    }

    /// Also watches the file at `path` for growth, rename and removal. `None` when it cannot be
    /// watched (it was renamed away meanwhile): the directory watch still notices its successor.
    pub fn add_file(&self, path: &Path) -> Option<FileWatch> {
        self.0.add_file(path).map(FileWatch)
    }

    pub fn remove(&self, w: FileWatch) {
        self.0.remove(w.0);
    }

    /// Sleeps until something watched changed, or `limit` passed.
    pub fn wait(&self, limit: Duration) -> Result<()> {
        self.0.wait(limit)
    }
}
