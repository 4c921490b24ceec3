//! The file an exec names, found as the kernel finds it for the caller: from the caller's root
//! (an absolute path), its working directory or the `execveat` directory (a relative one), in
//! the caller's mount namespace (its root and directories are opened through `/proc/PID`, and
//! every walk stays inside them); `/proc/self` and `/proc/thread-self` mean the caller; and a
//! magic link of `/proc/PID` (`fd/N`, `exe`, `cwd`, `root`, `map_files/…`) is followed to the
//! object it stands for, never through its text, as the kernel does. What cannot be found is
//! the error number the kernel would give the caller.
//!
//! Most paths take one `openat2`: with no symbolic link on the way (`RESOLVE_NO_SYMLINKS`) the
//! walk is the caller's whatever it meets; with links but no magic ones, `RESOLVE_IN_ROOT`
//! keeps absolute links inside the caller's root. Anything else is walked one name at a time.

use std::collections::VecDeque;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

/// Symbolic links followed in one walk before `ELOOP` (the kernel's `MAXSYMLINKS`).
const MAX_LINKS: u32 = 40;
/// The inode of a procfs root.
const PROC_ROOT_INO: u64 = 1;

/// Who execs: the thread that made the call.
#[derive(Debug, Default)]
pub struct Caller<'a> {
    pub tid: i32,
    /// The daemon's own child before its first exec, in this directory: seen as the daemon
    /// sees (its `/proc` entries are closed to the daemon).
    pub own: Option<std::path::PathBuf>,
    /// Its root directory, where the daemon knows it without a look.
    known_root: Option<&'a OwnedFd>,
    /// Else its root, once opened: one exec's files (the program, its interpreters) share it.
    root: std::cell::OnceCell<OwnedFd>,
}

impl<'a> Caller<'a> {
    /// The caller `tid`; `root`: its root directory when the daemon knows it without a look.
    pub fn new(tid: i32, own: Option<std::path::PathBuf>, root: Option<&'a OwnedFd>) -> Caller<'a> {
        Caller {
            tid,
            own,
            known_root: root,
            root: std::cell::OnceCell::new(),
        }
    }

    /// Its root directory (opened once).
    pub fn root(&self) -> Result<&OwnedFd, Miss> {
        if let Some(r) = self.known_root {
            return Ok(r);
        }
        if let Some(r) = self.root.get() {
            return Ok(r);
        }
        let r = open_of(self, "root")?;
        Ok(self.root.get_or_init(|| r))
    }

    /// Whether its root is one the daemon knows (its own): what is found from it is the same
    /// for every caller of the tree.
    pub fn known_root(&self) -> bool {
        self.known_root.is_some()
    }
}

/// Where a relative path starts.
#[derive(Clone, Copy, Debug)]
pub enum Base {
    Cwd,
    /// A descriptor of the caller's (`execveat`).
    Dir(i32),
}

/// A file found: a path descriptor of it and the name it was found by (its last link's
/// target's last component: what a blocklist matches).
#[derive(Debug)]
pub struct Found {
    pub fd: OwnedFd,
    pub name: Vec<u8>,
}

/// An error number the caller's exec would fail with.
pub type Errno = i32;

/// Why no file was found.
#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    /// The kernel would not find one either: the exec fails with this error.
    Errno(Errno),
    /// The caller's root, directory or descriptor cannot be opened by the daemon (the caller
    /// is gone, or the daemon may not look into it).
    NoView,
}

fn errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn cstr(bytes: &[u8]) -> Result<CString, Errno> {
    CString::new(bytes).map_err(|_| libc::ENOENT)
}

fn open_at(dir: RawFd, name: &CStr, flags: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: a NUL-terminated name; the new descriptor is owned at once.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC) };
    match fd {
        -1 => Err(errno()),
        // SAFETY: a new descriptor nothing else owns.
        fd => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
    }
}

/// `openat2(dir, path, O_PATH [| O_NOFOLLOW], resolve)`.
fn open2(dir: RawFd, path: &CStr, follow: bool, resolve: u64) -> Result<OwnedFd, Errno> {
    let mut how: libc::open_how = {
        // SAFETY: open_how is plain integers; zero is "nothing asked".
        unsafe { std::mem::zeroed() }
    };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW }) as u64;
    how.resolve = resolve;
    loop {
        // SAFETY: a NUL-terminated path and an open_how of the size given.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir,
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a new descriptor nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
        match errno() {
            // A rename raced a `..`: the kernel asks to try again.
            libc::EAGAIN => continue,
            e => return Err(e),
        }
    }
}

/// What a path descriptor is: file type bits, inode, mount id and device.
struct Kind {
    mode: u32,
    ino: u64,
    mnt: u64,
    dev: (u32, u32),
}

fn kind(fd: RawFd) -> Result<Kind, Errno> {
    // SAFETY: statx fills the zeroed buffer; AT_EMPTY_PATH looks at `fd` itself.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC,
            libc::STATX_TYPE | libc::STATX_INO | libc::STATX_MNT_ID,
            &mut stx,
        )
    };
    if r != 0 {
        return Err(errno());
    }
    Ok(Kind {
        mode: u32::from(stx.stx_mode),
        ino: stx.stx_ino,
        mnt: stx.stx_mnt_id,
        dev: (stx.stx_dev_major, stx.stx_dev_minor),
    })
}

fn is_type(mode: u32, t: u32) -> bool {
    mode & libc::S_IFMT == t
}

fn on_proc(fd: RawFd) -> bool {
    // SAFETY: fstatfs fills the zeroed buffer.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::fstatfs(fd, &mut fs) == 0 && fs.f_type == libc::PROC_SUPER_MAGIC }
}

/// The caller's root directory, or its working directory or one of its descriptors, opened
/// through `/proc` (in the caller's mount namespace, whatever the daemon's is).
pub fn open_of(c: &Caller<'_>, what: &str) -> Result<OwnedFd, Miss> {
    let path = match (&c.own, what) {
        (None, _) => format!("/proc/{}/{what}", c.tid).into_bytes(),
        (Some(_), "root") => b"/".to_vec(),
        (Some(cwd), "cwd") => cwd.as_os_str().as_bytes().to_vec(),
        (Some(_), _) => return Err(Miss::NoView),
    };
    let path = cstr(&path).map_err(Miss::Errno)?;
    open_at(libc::AT_FDCWD, &path, libc::O_PATH).map_err(|_| Miss::NoView)
}

/// The file `path` names for `c`, from `base` when it is relative; `follow`: a last component
/// that is a link is followed (as `execve` does; `execveat` with `AT_SYMLINK_NOFOLLOW` not).
pub fn find(c: &Caller<'_>, base: Base, path: &[u8], follow: bool) -> Result<Found, Miss> {
    let found = find_any(c, base, path, follow)?;
    // Not followed, a link is what was found, and an exec of it fails so.
    if !follow
        && is_type(
            kind(found.fd.as_raw_fd()).map_err(Miss::Errno)?.mode,
            libc::S_IFLNK,
        )
    {
        return Err(Miss::Errno(libc::ELOOP));
    }
    Ok(found)
}

fn find_any(c: &Caller<'_>, base: Base, path: &[u8], follow: bool) -> Result<Found, Miss> {
    if path.is_empty() {
        return Err(Miss::Errno(libc::ENOENT));
    }
    let root = c.root()?;
    let (start, absolute) = match (path[0] == b'/', base) {
        (true, _) => (None, true),
        (false, Base::Cwd) => (Some(open_of(c, "cwd")?), false),
        (false, Base::Dir(fd)) => (Some(open_of(c, &format!("fd/{fd}"))?), false),
    };
    let cpath = cstr(path).map_err(Miss::Errno)?;
    let dir = start.as_ref().unwrap_or(root).as_raw_fd();
    // No link at all on the way: the walk is the caller's. Relative paths may not climb out
    // of where they start (`..` above it would need the caller's root as the limit).
    let plain = libc::RESOLVE_NO_SYMLINKS
        | match absolute {
            true => libc::RESOLVE_IN_ROOT,
            false => libc::RESOLVE_BENEATH,
        };
    match open2(dir, &cpath, follow, plain) {
        Ok(fd) => {
            return Ok(Found {
                fd,
                name: last(path),
            })
        }
        Err(libc::ELOOP | libc::EXDEV) => {}
        // Not found (or not searchable) before any link: what the kernel says too.
        Err(e) => return Err(Miss::Errno(e)),
    }
    if absolute {
        let linked = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
        if let Ok(fd) = open2(dir, &cpath, follow, linked) {
            // Through `/proc/self` the daemon's own entries would be met: walked instead.
            if !on_proc(fd.as_raw_fd()) {
                let name = name_of(&fd).unwrap_or_else(|| last(path));
                return Ok(Found { fd, name });
            }
        }
    }
    let start = match start {
        Some(s) => s,
        None => dup(root).map_err(Miss::Errno)?,
    };
    let mut walk = Walk { c, root, links: 0 };
    walk.walk(start, path, follow).map_err(Miss::Errno)
}

fn dup(fd: &OwnedFd) -> Result<OwnedFd, Errno> {
    fd.try_clone()
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// The last component of `path`.
fn last(path: &[u8]) -> Vec<u8> {
    path.rsplit(|b| *b == b'/')
        .find(|c| !c.is_empty())
        .unwrap_or_default()
        .to_vec()
}

/// The name of the file `fd` is, read back (` (deleted)` left off).
pub fn name_of(fd: &OwnedFd) -> Option<Vec<u8>> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let text = link.as_os_str().as_bytes();
    let text = text.strip_suffix(b" (deleted)").unwrap_or(text);
    Some(last(text))
}

/// A walk one name at a time, for paths through links `openat2` cannot follow for the caller.
struct Walk<'a> {
    c: &'a Caller<'a>,
    root: &'a OwnedFd,
    links: u32,
}

impl Walk<'_> {
    fn walk(&mut self, start: OwnedFd, path: &[u8], follow: bool) -> Result<Found, Errno> {
        let mut todo: VecDeque<Vec<u8>> = VecDeque::new();
        push_front(&mut todo, path);
        let mut cur = start;
        let mut name = last(path);
        while let Some(part) = todo.pop_front() {
            if part == b".." {
                cur = self.up(cur)?;
                continue;
            }
            let is_last = todo.is_empty();
            let cpart = cstr(&part)?;
            let fd = open_at(cur.as_raw_fd(), &cpart, libc::O_PATH | libc::O_NOFOLLOW)?;
            let k = kind(fd.as_raw_fd())?;
            if is_type(k.mode, libc::S_IFLNK) {
                if is_last && !follow {
                    return Err(libc::ELOOP);
                }
                self.links += 1;
                if self.links > MAX_LINKS {
                    return Err(libc::ELOOP);
                }
                let proc_dir = kind(cur.as_raw_fd())
                    .ok()
                    .filter(|_| on_proc(cur.as_raw_fd()));
                if let Some(d) = proc_dir {
                    if d.ino != PROC_ROOT_INO {
                        // A magic link: the object itself, as the kernel follows it.
                        let target = open_at(cur.as_raw_fd(), &cpart, libc::O_PATH)?;
                        name = name_of(&target).unwrap_or(part);
                        if is_last {
                            return Ok(Found { fd: target, name });
                        }
                        cur = target;
                        continue;
                    }
                    if let Some(me) = self.me(&part) {
                        // The caller's own entry, by its numbers in the procfs it sees.
                        cur = open_at(cur.as_raw_fd(), &cstr(me.as_bytes())?, libc::O_PATH)?;
                        name = part;
                        continue;
                    }
                    // Any other link of a proc root (`mounts` → `self/mounts`): its text.
                }
                let text = read_link(cur.as_raw_fd(), &cpart)?;
                if text.first() == Some(&b'/') {
                    cur = dup(self.root)?;
                }
                push_front(&mut todo, &text);
                if todo.is_empty() {
                    // A link to `/`.
                    return Ok(Found { fd: cur, name });
                }
                continue;
            }
            name = part;
            if is_last {
                return Ok(Found { fd, name });
            }
            if !is_type(k.mode, libc::S_IFDIR) {
                return Err(libc::ENOTDIR);
            }
            cur = fd;
        }
        // The path ended at a directory (`.`, `..`, a trailing `/`).
        Ok(Found { fd: cur, name })
    }

    /// What `self` or `thread-self` of a procfs the caller sees stand for: its process (and
    /// thread) numbers in its own pid namespace, the last of `NStgid` and `NSpid`.
    fn me(&self, part: &[u8]) -> Option<String> {
        if part != b"self" && part != b"thread-self" {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.c.tid)).ok()?;
        let inner = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().last())
                .map(str::to_string)
        };
        let tgid = inner("NStgid:")?;
        match part {
            b"self" => Some(tgid),
            _ => Some(format!("{tgid}/task/{}", inner("NSpid:")?)),
        }
    }

    /// `..` of `cur`: the kernel's own (mounts crossed as they are), but never above the
    /// caller's root.
    fn up(&self, cur: OwnedFd) -> Result<OwnedFd, Errno> {
        let (here, top) = (kind(cur.as_raw_fd())?, kind(self.root.as_raw_fd())?);
        if (here.mnt, here.ino, here.dev) == (top.mnt, top.ino, top.dev) {
            return Ok(cur);
        }
        open_at(cur.as_raw_fd(), c"..", libc::O_PATH | libc::O_DIRECTORY)
    }
}

/// Puts the components of `path` before what is left to walk.
fn push_front(todo: &mut VecDeque<Vec<u8>>, path: &[u8]) {
    let parts: Vec<&[u8]> = path
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect();
    for p in parts.into_iter().rev() {
        todo.push_front(p.to_vec());
    }
}

fn read_link(dir: RawFd, name: &CStr) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: the buffer has the length given; the kernel writes at most that much.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(errno());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// A found file opened for reading, where it is a regular file the daemon may read: through
/// its own descriptor, so a deleted file or a memfd reads as well as any.
pub fn reopen(found: &OwnedFd) -> Option<std::fs::File> {
    let path = format!("/proc/self/fd/{}\0", found.as_raw_fd());
    let path = CStr::from_bytes_with_nul(path.as_bytes()).ok()?;
    let flags = libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK;
    open_at(libc::AT_FDCWD, path, flags)
        .ok()
        .map(std::fs::File::from)
}

#[cfg(test)]
mod tests;
