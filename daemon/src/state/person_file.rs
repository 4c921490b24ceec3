//! A file the person edits that decides what the daemon lets happen (`approvals.toml`,
//! `tokens.toml`): the daemon uses what it last read or wrote, and notices when the file has
//! been changed by anything else since. Such an edit counts only once a person confirms it
//! (`Reload`, or a restart): a command the daemon runs may be able to write the file.

use std::hash::Hasher;
use std::path::Path;
use std::time::SystemTime;

/// The file as the daemon last read or wrote it: its modification time, length and a hash of
/// its content (a touch that changes nothing is not an edit).
#[derive(Default, Clone, PartialEq, Eq, Debug)]
pub struct Seen(Option<(SystemTime, u64, u64)>);

fn content_hash(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    let mut h = std::hash::DefaultHasher::new();
    h.write(&bytes);
    Some(h.finish())
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl Seen {
    /// The file as it is now (nothing, when it does not exist).
    pub fn now(path: &Path) -> Seen {
        let Some((modified, len)) = stamp(path) else {
            return Seen(None);
        };
        Seen(content_hash(path).map(|h| (modified, len, h)))
    }

    /// Whether the file differs from what was seen: its time or length first (a `stat`),
    /// then its content.
    pub fn changed(&self, path: &Path) -> bool {
        match (&self.0, stamp(path)) {
            (None, None) => false,
            (Some((t, len, _)), Some(now)) if (*t, *len) == now => false,
            (Some((_, _, h)), Some(_)) => content_hash(path) != Some(*h),
            _ => true,
        }
    }
}

/// Writes `text` to `path` whole (a new file, mode 0600, renamed over the old: a reader sees
/// the old or the new, never half) and returns it as seen.
/// An error keeps the OS's kind, with the file named in its words.
pub fn write_whole(path: &Path, text: &str) -> std::io::Result<Seen> {
    let named = |what: String| {
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{what}: {e}"))
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(named(format!("cannot make {}", dir.display())))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = std::path::PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    cuba_protocol::safe_fs::write_new(&tmp, text.as_bytes())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(named(format!("cannot write {}", path.display())))?;
    Ok(Seen::now(path))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_edit_is_noticed_and_a_touch_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("f.toml");
        assert!(!Seen::default().changed(&path));
        let seen = write_whole(&path, "a = 1\n").unwrap();
        assert!(!seen.changed(&path));
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(!seen.changed(&path), "same content, new time");
        std::fs::write(&path, "a = 2\n").unwrap();
        assert!(seen.changed(&path));
        std::fs::remove_file(&path).unwrap();
        assert!(seen.changed(&path));
        assert!(!Seen::now(&path).changed(&path));
    }
}
