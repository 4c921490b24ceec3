//! File changes by looking again: Windows has change notifications (`ReadDirectoryChangesW`),
//! but they are not used here yet. `wait` sleeps 250 ms (less when the limit is shorter) and
//! the caller checks the file again, so a change is seen within a quarter of a second.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// How often a follower looks at the file again.
const RECHECK: Duration = Duration::from_millis(250);

/// A watched file: nothing to hold, the timer covers every file.
pub struct FileWatch;

pub struct Watcher;

impl Watcher {
    pub fn new(dir: &Path) -> Result<Watcher> {
        let meta =
            std::fs::metadata(dir).with_context(|| format!("cannot watch {}", dir.display()))?;
        if !meta.is_dir() {
            bail!("cannot watch {}: not a directory", dir.display());
        }
        Ok(Watcher)
    }

    /// `None` when the file is gone already, as where a watch must be placed on the file.
    pub fn add_file(&self, path: &Path) -> Option<FileWatch> {
        path.exists().then_some(FileWatch)
    }

    pub fn remove(&self, _w: FileWatch) {}

    pub fn wait(&self, limit: Duration) -> Result<()> {
        std::thread::sleep(limit.min(RECHECK));
        Ok(())
    }
}
