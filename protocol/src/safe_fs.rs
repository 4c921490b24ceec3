//! Opening files in the daemon's own directories (state, runtime, socket) so that a symbolic
//! link, or a file that is not this user's own, is never followed or reused.
//!
//! Those directories may be under `/tmp`, where a sandboxed command (Landlock
//! `workspace-write`) may write: it could plant `state/instance -> ~/.bashrc` and have the
//! unsandboxed daemon write a file the sandbox forbids. So every open here carries `O_NOFOLLOW`
//! (a link as the last component fails instead of being followed) and `O_NONBLOCK` (a planted
//! FIFO fails the checks instead of hanging the open; it changes nothing for a regular file),
//! and what was opened must be a regular file of this user with one name: a hard link to a file
//! elsewhere is refused as a symbolic link is. A file that must be new is created with
//! `O_EXCL`. Subdirectories are made with `mkdir` and checked with `lstat`. The errors name the
//! path and say the fix.
//!
//! On Windows the last component is opened as itself (`FILE_FLAG_OPEN_REPARSE_POINT`), so a
//! symbolic link or junction is refused instead of followed; who owns the file is left to the
//! directory's ACL (the user's own `%LOCALAPPDATA%`), which Windows checks at the open.

use std::fs::{self, File, OpenOptions};
use std::io;
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
#[cfg(windows)]
use std::os::windows::fs::OpenOptionsExt;
use std::path::Path;

/// `path` is a symbolic link: the error that says so, and what to do.
pub fn link_error(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is a symbolic link: refusing to follow it; remove it",
            path.display()
        ),
    )
}

pub(crate) fn foreign_error(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is {what}: refusing to use it; remove it",
            path.display()
        ),
    )
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// This process's effective uid.
#[cfg(unix)]
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Opens `path` with `options` without following a link, and checks that it is a regular file
/// of this user's with no other name. `options` says read, write, append, create as usual.
pub fn open(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = match no_follow(options).open(path) {
        Ok(f) => f,
        // ELOOP on Linux and macOS, EMLINK on FreeBSD: ask the path itself.
        Err(_) if is_link(path) => return Err(link_error(path)),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if meta.file_type().is_symlink() {
        return Err(link_error(path));
    }
    if !meta.file_type().is_file() {
        return Err(foreign_error(path, "not a regular file"));
    }
    owned(path, &meta)?;
    Ok(file)
}

#[cfg(unix)]
fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
}

#[cfg(windows)]
fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
}

/// A file of this user's with one name.
#[cfg(unix)]
fn owned(path: &Path, meta: &fs::Metadata) -> io::Result<()> {
    if meta.uid() != euid() {
        return Err(foreign_error(path, &format!("owned by uid {}", meta.uid())));
    }
    if meta.nlink() > 1 {
        return Err(foreign_error(path, "a hard link to another file"));
    }
    Ok(())
}

/// The directory's ACL decides who may open it (see the module's text).
#[cfg(windows)]
fn owned(_: &Path, _: &fs::Metadata) -> io::Result<()> {
    Ok(())
}

/// Opens `path` for reading (see [`open`]).
pub fn open_read(path: &Path) -> io::Result<File> {
    open(path, OpenOptions::new().read(true))
}

/// Opens `path` for appending, creating it if missing (see [`open`]).
pub fn open_append(path: &Path) -> io::Result<File> {
    open(path, OpenOptions::new().create(true).append(true))
}

/// Reads `path` as text (see [`open`]).
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    io::Read::read_to_string(&mut open_read(path)?, &mut text)?;
    Ok(text)
}

/// Creates `path` anew (`O_EXCL`, mode 0600), for reading and writing. A regular file already
/// there (one a crash left behind) is removed first; a link is refused, never followed.
pub fn create_new(path: &Path) -> io::Result<File> {
    let create = || {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create_new(true);
        #[cfg(unix)]
        options.mode(0o600);
        open(path, &mut options)
    };
    match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let meta = fs::symlink_metadata(path)?;
            if meta.file_type().is_symlink() {
                return Err(link_error(path));
            }
            if !meta.file_type().is_file() {
                return Err(foreign_error(path, "not a regular file"));
            }
            // unlink removes the name, whatever it points to: nothing is written through it.
            fs::remove_file(path)?;
            create()
        }
        other => other,
    }
}

/// Writes `contents` to `path`, created anew (see [`create_new`]).
pub fn write_new(path: &Path, contents: &[u8]) -> io::Result<()> {
    io::Write::write_all(&mut create_new(path)?, contents)
}

/// `path` split into what lies above the daemon's own directories and their `ours + 1` names
/// (the state directory and `ours` levels below it); a name that is not a plain one (`..`, a
/// root) is invalid input.
pub(crate) fn split_ours(
    path: &Path,
    ours: usize,
) -> io::Result<(std::path::PathBuf, Vec<&std::ffi::OsStr>)> {
    use std::path::Component;
    let parts: Vec<Component> = path.components().collect();
    let split = parts
        .len()
        .checked_sub(ours + 1)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let names = parts[split..]
        .iter()
        .map(|part| match part {
            Component::Normal(name) => Ok(*name),
            _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
        })
        .collect::<io::Result<_>>()?;
    Ok((parts[..split].iter().collect(), names))
}

/// A directory builder for the owner only: mode 0700 on Unix; on Windows a new directory takes
/// its parent's ACL, the user's own under `%LOCALAPPDATA%`.
pub fn owner_only_dir() -> fs::DirBuilder {
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    builder.mode(0o700);
    builder
}

/// Makes the subdirectory `dir` (mode 0700) if missing, and checks that it is a directory of
/// this user's and not a link to one. Its parent must exist (it is one of ours, checked).
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    match owner_only_dir().create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Err(link_error(dir));
    }
    if !meta.is_dir() {
        return Err(foreign_error(dir, "not a directory"));
    }
    #[cfg(unix)]
    if meta.uid() != euid() {
        return Err(foreign_error(dir, &format!("owned by uid {}", meta.uid())));
    }
    Ok(())
}

#[cfg(test)]
#[cfg(unix)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_refused_and_their_targets_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let canary = dir.path().join("canary");
        fs::write(&canary, b"keep").unwrap();
        let link = dir.path().join("link");
        symlink(&canary, &link).unwrap();

        for e in [
            open_append(&link).unwrap_err(),
            open_read(&link).unwrap_err(),
            create_new(&link).unwrap_err(),
        ] {
            let text = e.to_string();
            assert!(
                text.contains("is a symbolic link: refusing to follow it"),
                "{text}"
            );
            assert!(text.contains(&link.display().to_string()), "{text}");
        }
        let sub = dir.path().join("sub");
        symlink(dir.path(), &sub).unwrap();
        assert!(ensure_dir(&sub)
            .unwrap_err()
            .to_string()
            .contains("symbolic link"));
        assert_eq!(fs::read(&canary).unwrap(), b"keep");
    }

    #[test]
    fn hard_links_and_fifos_are_refused_and_leftovers_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let canary = dir.path().join("canary");
        fs::write(&canary, b"keep").unwrap();
        let hard = dir.path().join("hard");
        fs::hard_link(&canary, &hard).unwrap();
        assert!(open_append(&hard)
            .unwrap_err()
            .to_string()
            .contains("hard link"));

        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_to_string(&fifo).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");

        let left = dir.path().join("left");
        fs::write(&left, b"old").unwrap();
        write_new(&left, b"new").unwrap();
        assert_eq!(fs::read(&left).unwrap(), b"new");
        assert_eq!(fs::read(&canary).unwrap(), b"keep");
    }
}
