//! A directory of the daemon's own on Windows, with the same calls as on Unix. Windows has no
//! `openat`: each component below the state directory is checked not to be a link or junction
//! (`symlink_metadata`), and each file is opened as itself through [`crate::safe_fs`], which
//! refuses a link at the open. The directory is held open while it is used, so it cannot be
//! renamed or replaced meanwhile (Windows refuses to rename an open directory's parent chain
//! without delete sharing).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::safe_fs::{self, foreign_error, link_error};

/// An open directory of ours and its path.
pub struct Dir {
    path: PathBuf,
    // Held open: Windows does not let a directory with an open handle be replaced.
    _held: File,
}

/// Checks that `path` is a real directory, not a link or junction.
fn real_dir(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(link_error(path));
    }
    if !meta.is_dir() {
        return Err(foreign_error(path, "not a directory"));
    }
    Ok(())
}

/// A handle on directory `path` (backup semantics: how Windows opens a directory).
fn hold(path: &Path) -> io::Result<File> {
    use std::os::windows::fs::OpenOptionsExt;
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
}

impl Dir {
    /// Opens `path`, whose last `ours + 1` components are the daemon's: each is checked not to
    /// be a link, and the `ours` below the state directory made when `create`.
    pub fn open(path: &Path, ours: usize, create: bool) -> io::Result<Dir> {
        let (mut shown, names) = safe_fs::split_ours(path, ours)?;
        for (i, name) in names.into_iter().enumerate() {
            shown.push(name);
            if create && i > 0 {
                match std::fs::create_dir(&shown) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
            }
            real_dir(&shown)?;
        }
        let held = hold(&shown)?;
        Ok(Dir {
            path: shown,
            _held: held,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates `name` anew in this directory, for reading and writing; a regular file already
    /// there is replaced, a link refused.
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        safe_fs::create_new(&self.path.join(name))
    }

    /// Opens `name` for reading: a regular file, not a link.
    pub fn open_read(&self, name: &str) -> io::Result<File> {
        safe_fs::open_read(&self.path.join(name))
    }

    /// Opens `name` to read and append to (a file this daemon made before).
    pub fn open_append(&self, name: &str) -> io::Result<File> {
        safe_fs::open(
            &self.path.join(name),
            OpenOptions::new().read(true).append(true),
        )
    }

    /// The size of `name`, not following a link.
    pub fn len_of(&self, name: &str) -> io::Result<u64> {
        Ok(self.open_read(name)?.metadata()?.len())
    }

    /// Renames `from` onto `to`, both in this directory (replacing `to`).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(self.path.join(from), self.path.join(to))
    }

    /// Removes `name` from this directory (a link's name, never its target).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        std::fs::remove_file(self.path.join(name))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn files_are_made_read_renamed_and_removed_in_a_checked_directory() {
        let top = tempfile::tempdir().unwrap();
        let state = top.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let dir = Dir::open(&state.join("spool"), 1, true).unwrap();
        assert!(state.join("spool").is_dir());
        std::io::Write::write_all(&mut dir.create_new("a").unwrap(), b"one").unwrap();
        std::io::Write::write_all(&mut dir.open_append("a").unwrap(), b"two").unwrap();
        assert_eq!(dir.len_of("a").unwrap(), 6);
        dir.rename("a", "b").unwrap();
        assert!(dir.open_read("a").is_err());
        assert_eq!(
            std::fs::read(state.join("spool").join("b")).unwrap(),
            b"onetwo"
        );
        dir.remove("b").unwrap();
        assert!(dir.open_read("b").is_err());
        assert!(Dir::open(&state.join("missing"), 1, false).is_err());
    }
}
