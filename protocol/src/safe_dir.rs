//! A directory of the daemon's own, opened component by component without following a link
//! (`openat` with `O_NOFOLLOW | O_DIRECTORY` from the state directory down), and files made
//! and read relative to that handle. A directory renamed and replaced by a link after it was
//! checked cannot redirect them: the handle is the directory that was checked.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::safe_fs::{euid, foreign_error, link_error};

/// An open directory of ours and the path it was opened as (for messages).
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

fn c_name(name: &std::ffi::OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// `openat(at, name, flags)`, the error naming `shown`; a link is refused by name.
fn open_at(
    at: libc::c_int,
    name: &CString,
    flags: libc::c_int,
    shown: &Path,
) -> io::Result<OwnedFd> {
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: a NUL-terminated name and a descriptor we hold (or AT_FDCWD); the mode is read
    // only with O_CREAT.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd >= 0 {
        // SAFETY: a descriptor openat just returned, owned by nothing else.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let e = io::Error::last_os_error();
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: as above; fstatat writes the stat it is given.
    let linked = unsafe {
        libc::fstatat(
            at,
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0
            && (st.assume_init().st_mode & libc::S_IFMT) == libc::S_IFLNK
    };
    Err(match (linked, e.raw_os_error()) {
        (true, _) => link_error(shown),
        (false, Some(libc::ENOTDIR)) if flags & libc::O_DIRECTORY != 0 => {
            foreign_error(shown, "not a directory")
        }
        // The OS's reason, with the path it is about.
        (false, _) => io::Error::new(e.kind(), format!("{}: {e}", shown.display())),
    })
}

/// Checks an opened directory or file: of this user's, the right kind, one name for a file.
fn checked(fd: OwnedFd, dir: bool, shown: &Path) -> io::Result<OwnedFd> {
    let file = File::from(fd);
    let meta = file.metadata()?;
    if dir && !meta.is_dir() {
        return Err(foreign_error(shown, "not a directory"));
    }
    if !dir && !meta.is_file() {
        return Err(foreign_error(shown, "not a regular file"));
    }
    if meta.uid() != euid() {
        return Err(foreign_error(
            shown,
            &format!("owned by uid {}", meta.uid()),
        ));
    }
    if !dir && meta.nlink() > 1 {
        return Err(foreign_error(shown, "a hard link to another file"));
    }
    Ok(OwnedFd::from(file))
}

impl Dir {
    /// Opens `path`, whose last `ours + 1` components are the daemon's (the state directory
    /// and `ours` levels below it): those are opened without following a link, and the `ours`
    /// below the state directory made (mode 0700) when `create`. What lies above the state
    /// directory is the system's (`/tmp`, perhaps itself a link) and is followed as usual.
    pub fn open(path: &Path, ours: usize, create: bool) -> io::Result<Dir> {
        let (base, names) = crate::safe_fs::split_ours(path, ours)?;
        let base = if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        };
        let top = File::open(&base)?;
        let mut fd = OwnedFd::from(top);
        let mut shown = base;
        for (i, name) in names.into_iter().enumerate() {
            shown.push(name);
            let name = c_name(name)?;
            if create && i > 0 {
                // SAFETY: a NUL-terminated name relative to a directory we hold.
                let made = unsafe { libc::mkdirat(fd.as_raw_fd(), name.as_ptr(), 0o700) };
                if made != 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::AlreadyExists {
                        return Err(e);
                    }
                }
            }
            let next = open_at(
                fd.as_raw_fd(),
                &name,
                libc::O_RDONLY | libc::O_DIRECTORY,
                &shown,
            );
            // A link to a directory fails O_DIRECTORY|O_NOFOLLOW with ENOTDIR on some systems.
            fd = checked(next?, true, &shown)?;
        }
        Ok(Dir { fd, path: shown })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates `name` anew in this directory (`O_EXCL`, mode 0600), for reading and writing.
    /// A regular file already there (a crash's leftover) is removed first; a link is refused.
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        let shown = self.path.join(name);
        let c = c_name(name.as_ref())?;
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
        match open_at(self.fd.as_raw_fd(), &c, flags, &shown) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Not a link (that was refused above): unlink removes the name only.
                self.remove(name)?;
                let fd = open_at(self.fd.as_raw_fd(), &c, flags, &shown)?;
                Ok(File::from(checked(fd, false, &shown)?))
            }
            other => Ok(File::from(checked(other?, false, &shown)?)),
        }
    }

    /// Opens `name` in this directory for reading: a regular file of ours, not a link.
    pub fn open_read(&self, name: &str) -> io::Result<File> {
        let shown = self.path.join(name);
        let c = c_name(name.as_ref())?;
        let fd = open_at(self.fd.as_raw_fd(), &c, libc::O_RDONLY, &shown)?;
        Ok(File::from(checked(fd, false, &shown)?))
    }

    /// Opens `name` in this directory to read and append to (a file this daemon made before).
    pub fn open_append(&self, name: &str) -> io::Result<File> {
        let shown = self.path.join(name);
        let c = c_name(name.as_ref())?;
        let fd = open_at(
            self.fd.as_raw_fd(),
            &c,
            libc::O_RDWR | libc::O_APPEND,
            &shown,
        )?;
        Ok(File::from(checked(fd, false, &shown)?))
    }

    /// The size of `name` in this directory, without following a link: a link or anything
    /// but a regular file is an error naming it.
    pub fn len_of(&self, name: &str) -> io::Result<u64> {
        Ok(self.open_read(name)?.metadata()?.len())
    }

    /// Renames `from` onto `to`, both in this directory (`renameat`).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (f, t) = (c_name(from.as_ref())?, c_name(to.as_ref())?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: NUL-terminated names relative to a directory we hold.
        match unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Removes `name` from this directory (`unlinkat`: the name, never what a link points to).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let c = c_name(name.as_ref())?;
        // SAFETY: a NUL-terminated name relative to a directory we hold.
        match unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_directory_swapped_for_a_link_is_refused_and_an_open_handle_stays_put() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();

        let spool = Dir::open(&state.join("spool").join("7"), 2, true).unwrap();
        // The directory renamed away and a link put in its place after the check: the handle
        // still makes its files in the directory that was checked.
        std::fs::rename(state.join("spool"), root.path().join("moved")).unwrap();
        symlink(&elsewhere, state.join("spool")).unwrap();
        std::fs::create_dir(elsewhere.join("7")).unwrap();
        spool.create_new("1.tmp").unwrap();
        spool.rename("1.tmp", "1.out").unwrap();
        assert!(root.path().join("moved/7/1.out").is_file());
        assert!(!elsewhere.join("7/1.out").exists());
        // A new open refuses the link, naming it.
        let e = Dir::open(&state.join("spool").join("7"), 2, true)
            .err()
            .unwrap();
        assert!(e.to_string().contains("spool is a symbolic link"), "{e}");

        // A file planted as a link is neither created through nor read nor measured.
        let ok = Dir::open(&root.path().join("moved").join("7"), 1, false).unwrap();
        let canary = root.path().join("canary");
        std::fs::write(&canary, b"keep").unwrap();
        symlink(&canary, root.path().join("moved/7/2.out")).unwrap();
        for e in [
            ok.create_new("2.out").err().unwrap(),
            ok.open_read("2.out").err().unwrap(),
            ok.len_of("2.out").err().unwrap(),
        ] {
            assert!(e.to_string().contains("2.out is a symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read(&canary).unwrap(), b"keep");
    }
}
