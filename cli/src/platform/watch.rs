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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Instant;

    use super::*;

    /// A wait that returns well before its limit saw an event.
    fn woke(w: &Watcher) -> bool {
        let t = Instant::now();
        w.wait(Duration::from_secs(10)).expect("wait");
        t.elapsed() < Duration::from_secs(5)
    }

    #[test]
    fn new_files_and_growth_wake_the_watcher() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.jsonl");
        let mut file = std::fs::File::create(&path).expect("create");
        let w = Watcher::new(dir.path()).expect("watch dir");
        std::fs::write(dir.path().join("audit.jsonl.new"), b"x").expect("create another");
        assert!(woke(&w), "a new file in the directory not seen");
        let fw = w.add_file(&path).expect("watch file");
        file.write_all(b"line\n").expect("write");
        assert!(woke(&w), "growth not seen");
        w.remove(fw);
    }
}
