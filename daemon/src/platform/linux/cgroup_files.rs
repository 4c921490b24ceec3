//! The cgroup file system as the daemon reads it: where the trees are mounted, the daemon's own
//! cgroup in them, and the small flat-keyed files of a cgroup.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub(super) struct Mount {
    pub point: PathBuf,
    pub fstype: String,
    /// The super options (`rw,pids`): which v1 controllers a hierarchy has.
    pub options: String,
}

/// `/proc/self/mountinfo`: `ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS…] - FSTYPE SOURCE SUPER`.
pub(super) fn mounts() -> Result<Vec<Mount>> {
    let text = read(Path::new("/proc/self/mountinfo")).context("cannot read mountinfo")?;
    Ok(text.lines().filter_map(parse_mount).collect())
}

pub(super) fn parse_mount(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let point = left.split(' ').nth(4)?;
    let mut r = right.split(' ');
    let fstype = r.next()?.to_string();
    let options = r.nth(1).unwrap_or_default().to_string();
    // Octal escapes (`\040` for a space) in mount points.
    let point = point.replace("\\040", " ");
    Some(Mount {
        point: PathBuf::from(point),
        fstype,
        options,
    })
}

pub(super) fn v2_mount() -> Result<PathBuf> {
    mounts()?
        .into_iter()
        .find(|m| m.fstype == "cgroup2")
        .map(|m| m.point)
        .context("no cgroup v2 tree is mounted")
}

/// The daemon's cgroup under `mount`, from its `/proc/self/cgroup` line for `tag` (`0::` for
/// v2, `:pids:` for the v1 hierarchy that holds pids, alone or with others: `cpu,cpuacct`).
pub(super) fn own_path(mount: &Path, tag: &str) -> Result<PathBuf> {
    let text = read(Path::new("/proc/self/cgroup")).context("cannot read /proc/self/cgroup")?;
    let rel =
        cgroup_of(&text, tag).with_context(|| format!("/proc/self/cgroup has no {tag} entry"))?;
    Ok(mount.join(rel.trim().trim_start_matches('/')))
}

/// The path of `tag`'s line in a `/proc/PID/cgroup` text (see [`own_path`]).
fn cgroup_of<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let controller = tag.trim_matches(':');
    text.lines().find_map(|l| match tag {
        "0::" => l.strip_prefix("0::"),
        _ => {
            // `N:CONTROLLERS:PATH`.
            let mut parts = l.splitn(3, ':');
            let held = parts.nth(1)?.split(',').any(|c| c == controller);
            held.then(|| parts.next())?
        }
    })
}

pub(super) fn read(path: &Path) -> io::Result<String> {
    fs::read_to_string(path)
}

pub(super) fn remove_dir(dir: &Path) {
    if let Err(e) = fs::remove_dir(dir) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!("cannot remove cgroup {}: {e}", dir.display());
        }
    }
}

/// `usage_usec` of `dir`'s `cpu.stat`: the CPU time of everything the cgroup ever held.
pub(super) fn cpu_usage_us(dir: &Path) -> Option<u64> {
    field(&read_small(&dir.join("cpu.stat"))?, "usage_usec")
}

pub(super) fn populated(dir: &Path) -> bool {
    read_small(&dir.join("cgroup.events"))
        .as_deref()
        .and_then(|t| field(t, "populated"))
        .is_some_and(|n| n > 0)
}

/// A small cgroup file, in one read where it fits (they do: a few lines), without the size
/// query and the read for the end that `fs::read_to_string` adds: these are read at every
/// process's exit, on the way to its reply.
pub(super) fn read_small(path: &Path) -> Option<String> {
    pread_small(&fs::File::open(path).ok()?)
}

/// A v2 cgroup's directory (a child is born in it by descriptor) and the two files read at
/// every process's end (`cgroup.events`, `cpu.stat`), open while the cgroup serves processes,
/// in the pool too: a spawn opens nothing, and each read is one `pread`, without the path walk,
/// open and close of a read by name (3–5 µs each, on the way to the exit's reply).
#[derive(Debug)]
pub struct Files {
    dir: OwnedFd,
    events: fs::File,
    cpu: fs::File,
}

impl Files {
    pub fn open(dir: &Path) -> io::Result<Files> {
        Ok(Files {
            dir: open_dir(dir)?,
            events: fs::File::open(dir.join("cgroup.events"))?,
            cpu: fs::File::open(dir.join("cpu.stat"))?,
        })
    }

    /// The directory, for `CLONE_INTO_CGROUP`.
    pub fn dir(&self) -> RawFd {
        self.dir.as_raw_fd()
    }

    /// `populated` of `cgroup.events`; `None` if it cannot be read (the cgroup was removed).
    pub fn populated(&self) -> Option<bool> {
        field(&pread_small(&self.events)?, "populated").map(|n| n > 0)
    }

    /// `usage_usec` of `cpu.stat`.
    pub fn cpu_usage_us(&self) -> Option<u64> {
        field(&pread_small(&self.cpu)?, "usage_usec")
    }

    /// The file `name` of the cgroup, opened relative to its directory (no path walk).
    pub fn open_at(&self, name: &std::ffi::CStr) -> io::Result<fs::File> {
        use std::os::fd::FromRawFd;
        // SAFETY: openat of a NUL-terminated name relative to a directory descriptor we own;
        // the descriptor it returns is new and ours.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(unsafe { fs::File::from_raw_fd(fd) })
    }
}

/// The pids in a `cgroup.procs` text.
pub(super) fn pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// A cgroup's directory, open close-on-exec (for `CLONE_INTO_CGROUP`).
pub(super) fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_DIRECTORY)
        .open(dir)
        .map(OwnedFd::from)
}

/// A small file of an open descriptor, from its start (a cgroup file is made anew at each read
/// from offset 0), in one read where it fits.
pub(super) fn pread_small(file: &fs::File) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 1024];
    let n = file.read_at(&mut buf, 0).ok()?;
    if n < buf.len() {
        return Some(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    // Longer than a cgroup's flat-keyed file ever is: read it whole.
    let mut all = buf.to_vec();
    let mut chunk = [0u8; 1024];
    loop {
        let m = file.read_at(&mut chunk, all.len() as u64).ok()?;
        if m == 0 {
            return Some(String::from_utf8_lossy(&all).into_owned());
        }
        all.extend_from_slice(&chunk[..m]);
    }
}

/// The value of `key` in a flat-keyed file (`key value` lines).
pub(super) fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A v1 cgroup's `tasks`, for the child to enter it by a write of "0". Not `cgroup.procs`: that
/// moves a whole thread group under the kernel's `cgroup_threadgroup_rwsem` taken for writing,
/// an RCU grace period (3 ms a spawn here, measured in docs/measurements.md); `tasks` moves the
/// one thread, the writer, without it. The child is that one thread (a clone of one thread of
/// the daemon, before its exec), so the whole process moves, and what it starts later is born
/// there.
pub(super) fn open_tasks(dir: &Path) -> io::Result<OwnedFd> {
    let f = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(dir.join("tasks"))?;
    Ok(OwnedFd::from(f))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn mountinfo_lines_parse() {
        let m = parse_mount(
            "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw",
        )
        .unwrap();
        assert_eq!(m.point, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(m.fstype, "cgroup2");
        let m = parse_mount("39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids").unwrap();
        assert_eq!(
            (m.fstype.as_str(), m.options.as_str()),
            ("cgroup", "rw,pids")
        );
    }

    #[test]
    fn a_v1_controller_is_found_alone_or_mounted_with_others() {
        let text = "4:memory:/a\n1:cpu,cpuacct:/b/c\n8:pids:/\n0::/d\n";
        assert_eq!(super::cgroup_of(text, ":cpu:"), Some("/b/c"));
        assert_eq!(super::cgroup_of(text, ":cpuacct:"), Some("/b/c"));
        assert_eq!(super::cgroup_of(text, ":memory:"), Some("/a"));
        assert_eq!(super::cgroup_of(text, "0::"), Some("/d"));
        assert_eq!(super::cgroup_of(text, ":blkio:"), None);
    }
}
