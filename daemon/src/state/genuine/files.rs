//! The files genuine programs are: where they are looked for, a file's identity (device and
//! inode, the same under any path or link), and whether only root can change what is at a
//! path.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The programs that run an askpass helper, by name.
const PROGRAMS: &[&str] = &["sudo", "ssh", "git"];

/// Where git keeps its helpers, under its prefix (the parent of its `bin`).
const GIT_CORE: &[&str] = &["lib/git-core", "libexec/git-core"];

/// Where macOS keeps the git its `/usr/bin/git` runs (the developer tools' own prefixes).
#[cfg(target_os = "macos")]
const DEVELOPER_PREFIXES: &[&str] = &[
    "/Library/Developer/CommandLineTools/usr",
    "/Applications/Xcode.app/Contents/Developer/usr",
];
#[cfg(not(target_os = "macos"))]
const DEVELOPER_PREFIXES: &[&str] = &[];

/// A file's identity: the same file under any path, link or name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileId {
    pub(super) dev: u64,
    pub(super) ino: u64,
}

impl FileId {
    fn of(file: &std::fs::Metadata) -> FileId {
        FileId {
            dev: file.dev(),
            ino: file.ino(),
        }
    }
}

/// One genuine program.
#[derive(Debug)]
pub(super) struct Known {
    pub(super) name: String,
    pub(super) path: PathBuf,
    pub(super) id: FileId,
    pub(super) setuid: bool,
    /// Only root can change it (see [`root_only`]): a file root puts at its path later (a
    /// package upgrade) is as genuine as this one.
    pub(super) root_only: bool,
}

impl Known {
    pub(super) fn at(path: &Path, name: &str) -> Option<Known> {
        let file = std::fs::metadata(path).ok()?;
        file.is_file().then(|| Known {
            name: name.to_string(),
            path: path.to_path_buf(),
            id: FileId::of(&file),
            setuid: setuid_root(&file),
            root_only: root_only(path),
        })
    }

    /// Whether `file` (a process's program) is this one, or what root put at its path since.
    pub(super) fn is(&self, file: &std::fs::Metadata) -> bool {
        let id = FileId::of(file);
        if id == self.id {
            return true;
        }
        let Ok(now) = std::fs::metadata(&self.path) else {
            return false;
        };
        self.root_only
            && FileId::of(&now) == id
            && root_only(&self.path)
            && setuid_root(&now) == self.setuid
    }
}

/// Owned by root with the setuid bit: what a genuine `sudo` is.
fn setuid_root(file: &std::fs::Metadata) -> bool {
    // The set-user-ID bit (`S_ISUID`, a `u16` on macOS).
    file.uid() == 0 && file.mode() & 0o4000 != 0
}

/// Whether only root can change what is at `path` (an absolute path), or put something there:
/// as far as it exists, it and every directory above it, as written and with links resolved,
/// are root's and writable by nobody else.
pub(super) fn root_only(path: &Path) -> bool {
    let safe = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0);
    let Some(existing) = path
        .ancestors()
        .find(|p| std::fs::symlink_metadata(p).is_ok())
    else {
        return false;
    };
    let Ok(real) = std::fs::canonicalize(existing) else {
        return false;
    };
    path.is_absolute() && existing.ancestors().all(safe) && real.ancestors().all(safe)
}

/// The genuine programs: `sudo`, `ssh` and `git` in `path_var`'s directories and the system's,
/// and git's helpers beside each git (and, on macOS, in the developer tools).
pub(super) fn programs(path_var: Option<&OsStr>) -> Vec<Known> {
    let mut dirs: Vec<PathBuf> = path_var.map_or_else(Vec::new, |p| {
        std::env::split_paths(p)
            .filter(|d| d.is_absolute())
            .collect()
    });
    dirs.extend(crate::platform::SYSTEM_BIN_DIRS.iter().map(PathBuf::from));
    let mut programs: Vec<Known> = Vec::new();
    for dir in &dirs {
        for name in PROGRAMS {
            let Some(k) = Known::at(&dir.join(name), name) else {
                continue;
            };
            // A sudo that is not setuid root cannot ask for anyone's password.
            if *name != "sudo" || k.setuid {
                add(&mut programs, k);
            }
        }
    }
    let mut prefixes: Vec<PathBuf> = programs
        .iter()
        .filter(|k| k.name == "git")
        .filter_map(|k| git_prefix(&k.path))
        .collect();
    prefixes.extend(DEVELOPER_PREFIXES.iter().map(PathBuf::from));
    for prefix in &prefixes {
        if let Some(git) = Known::at(&prefix.join("bin/git"), "git") {
            add(&mut programs, git);
        }
        for helper in git_helpers(prefix) {
            add(&mut programs, helper);
        }
    }
    programs
}

/// Adds `k` to `programs` unless the same file is there already (under another path).
fn add(programs: &mut Vec<Known>, k: Known) {
    if !programs.iter().any(|o| o.id == k.id) {
        programs.push(k);
    }
}

/// The prefix of a git: the parent of the `bin` its real file is in.
fn git_prefix(git: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(git).ok()?;
    Some(real.parent()?.parent()?.to_path_buf())
}

/// Git's helpers under `prefix` that run `GIT_ASKPASS`: the HTTP and FTP transports, and the
/// git kept beside them.
fn git_helpers(prefix: &Path) -> Vec<Known> {
    let wanted = |n: &str| {
        matches!(n, "git" | "git-remote-http" | "git-remote-https")
            || n.starts_with("git-remote-ftp")
    };
    GIT_CORE
        .iter()
        .filter_map(|sub| std::fs::read_dir(prefix.join(sub)).ok())
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            wanted(&name).then(|| Known::at(&entry.path(), &name))?
        })
        .collect()
}
