//! Process facts from libproc and sysctl: parent, group, start time and state
//! (`PROC_PIDTBSDINFO`, which also answers for zombies), the live processes
//! (`proc_listallpids`), a process's children (`proc_listchildpids`), its environment
//! (`sysctl(KERN_PROCARGS2)`, readable for the daemon's own user's processes) and its working
//! directory (`PROC_PIDVNODEPATHINFO`); and what the askpass check asks of a process: its
//! program (`proc_pidpath`), user ids and tracing (`PROC_PIDTBSDINFO`), environment and
//! arguments (`KERN_PROCARGS2`).

use std::cell::RefCell;
use std::ffi::{c_int, c_void, CStr};
use std::mem::{size_of, MaybeUninit};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use cuba_protocol::procargs;

use crate::platform::StartTime;

/// What the kernel says about a process that we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    /// Start time in microseconds since the epoch: with the pid, identifies a process.
    pub start_time: StartTime,
}

/// `proc_pidinfo` of one fixed-size `flavor` into a `T`; `None` unless it filled all of it.
pub(super) fn pidinfo<T>(pid: i32, flavor: c_int, arg: u64) -> Option<T> {
    let mut info = MaybeUninit::<T>::zeroed();
    let size = c_int::try_from(size_of::<T>()).ok()?;
    // SAFETY: the buffer is valid for `size` bytes; the kernel writes at most that.
    let n = unsafe { libc::proc_pidinfo(pid, flavor, arg, info.as_mut_ptr().cast(), size) };
    if n != size {
        return None;
    }
    // SAFETY: the kernel filled the whole buffer (and the types used are plain C structs).
    Some(unsafe { info.assume_init() })
}

fn bsdinfo(pid: i32) -> Option<libc::proc_bsdinfo> {
    if pid <= 0 {
        return None;
    }
    pidinfo(pid, libc::PROC_PIDTBSDINFO, 0)
}

fn of(pid: i32, info: &libc::proc_bsdinfo) -> ProcStat {
    ProcStat {
        pid,
        ppid: info.pbi_ppid as i32,
        pgrp: info.pbi_pgid as i32,
        start_time: StartTime(info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec),
    }
}

/// The process `pid`, zombie or not.
pub fn stat(pid: i32) -> Option<ProcStat> {
    bsdinfo(pid).map(|info| of(pid, &info))
}

/// A point in time a child's start comes after (Linux reads its start time from the clock).
#[derive(Clone, Copy)]
pub struct Clock;

pub fn clock() -> Clock {
    Clock
}

/// The start time of `pid`, a child made after the clock was read.
pub fn start_time_of(pid: i32, _before: Clock) -> StartTime {
    stat(pid).map_or(StartTime::UNKNOWN, |s| s.start_time)
}

/// The process `pid` if it is alive (not a zombie: dead already, and `kill` "succeeds" on it).
pub fn live(pid: i32) -> Option<ProcStat> {
    let info = bsdinfo(pid)?;
    (info.pbi_status != libc::SZOMB).then(|| of(pid, &info))
}

/// A list of pids from a libproc call that fills a buffer and returns how many it wrote; the
/// buffer grows until the list fits (processes may appear between calls).
fn pids(fill: impl Fn(*mut c_void, c_int) -> c_int) -> Vec<i32> {
    let mut cap = 256usize;
    loop {
        let mut buf = vec![0i32; cap];
        let Ok(bytes) = c_int::try_from(cap * size_of::<i32>()) else {
            return Vec::new();
        };
        let Ok(n) = usize::try_from(fill(buf.as_mut_ptr().cast(), bytes)) else {
            return Vec::new();
        };
        if n < cap {
            buf.truncate(n);
            buf.retain(|p| *p > 0);
            return buf;
        }
        cap *= 4;
    }
}

/// Every live process on the machine.
pub fn scan() -> Vec<ProcStat> {
    // SAFETY: proc_listallpids writes at most `size` bytes of pids into the buffer.
    pids(|buf, size| unsafe { libc::proc_listallpids(buf, size) })
        .into_iter()
        .filter_map(live)
        .collect()
}

/// The children of `pid`.
pub fn children(pid: i32) -> Vec<i32> {
    // SAFETY: proc_listchildpids writes at most `size` bytes of pids into the buffer.
    pids(|buf, size| unsafe { libc::proc_listchildpids(pid, buf, size) })
}

/// The daemon's own children.
pub fn own_children() -> Vec<i32> {
    children(std::process::id() as i32)
}

/// `KERN_ARGMAX`: the largest argument and environment block a process can have (1 MiB on
/// current macOS), so the size of a buffer that holds any `KERN_PROCARGS2`.
fn arg_max() -> Option<usize> {
    static MAX: OnceLock<Option<usize>> = OnceLock::new();
    *MAX.get_or_init(|| {
        let mut max: c_int = 0;
        let mut len = size_of::<c_int>();
        let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
        // SAFETY: sysctl reads KERN_ARGMAX into an int of the given length.
        let rc = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                2,
                (&mut max as *mut c_int).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        (rc == 0).then(|| usize::try_from(max).ok()).flatten()
    })
}

thread_local! {
    /// One `KERN_ARGMAX` buffer per thread: a scan reads every process's block, and a fresh
    /// megabyte for each would cost an mmap and munmap apiece.
    static ARGS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `f` on `sysctl(KERN_PROCARGS2)` of `pid`: its arguments and environment as the kernel keeps
/// them (readable for the daemon's own user's processes only).
fn with_procargs2<T>(pid: i32, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
    let max = arg_max()?;
    ARGS.with(|buf| {
        let mut buf = buf.try_borrow_mut().ok()?;
        if buf.len() < max {
            buf.resize(max, 0);
        }
        let mut len = buf.len();
        let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
        // SAFETY: sysctl writes at most `len` bytes into the buffer and sets `len` to what it
        // wrote.
        let rc = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                3,
                buf.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        (rc == 0).then(|| f(&buf[..len.min(buf.len())]))
    })
}

/// Whether `pid`'s environment has the entry `NAME=VALUE` exactly.
pub fn has_env_entry(pid: i32, entry: &str) -> bool {
    with_procargs2(pid, |buf| {
        procargs::env_entries(buf)
            .into_iter()
            .any(|kv| kv == entry.as_bytes())
    })
    .unwrap_or(false)
}

/// The rest of the first entry of `pid`'s environment that starts with `prefix`.
pub fn env_entry_after(pid: i32, prefix: &[u8]) -> Option<Vec<u8>> {
    with_procargs2(pid, |buf| {
        procargs::env_entries(buf)
            .into_iter()
            .find_map(|kv| kv.strip_prefix(prefix))
            .map(<[u8]>::to_vec)
    })?
}

/// The name `pid` runs as (its program's name, as the kernel keeps it).
pub fn name(pid: i32) -> Option<String> {
    let info = bsdinfo(pid)?;
    let bytes: Vec<u8> = info.pbi_comm.iter().map(|c| *c as u8).collect();
    let name = CStr::from_bytes_until_nul(&bytes).ok()?.to_str().ok()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// The working directory of `pid` now.
pub fn cwd(pid: u32) -> Option<PathBuf> {
    let info: libc::proc_vnodepathinfo =
        pidinfo(i32::try_from(pid).ok()?, libc::PROC_PIDVNODEPATHINFO, 0)?;
    // The path is a MAXPATHLEN C string stored as rows of 32 chars.
    let bytes: Vec<u8> = info
        .pvi_cdir
        .vip_path
        .iter()
        .flatten()
        .map(|c| *c as u8)
        .collect();
    let path = CStr::from_bytes_until_nul(&bytes).ok()?;
    let path = path.to_str().ok()?;
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// The program `pid` runs: its path (`proc_pidpath`) and the file now at that path. Unlike
/// Linux's `/proc/PID/exe` this is the path, not the file the process was started from: a file
/// put at that path since is the one seen.
pub fn exe(pid: i32) -> std::io::Result<(PathBuf, std::fs::Metadata)> {
    let mut buf = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
    let size = u32::try_from(buf.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    // SAFETY: proc_pidpath writes at most `size` bytes (a NUL-terminated path) into the buffer.
    let n = unsafe { libc::proc_pidpath(pid, buf.as_mut_ptr().cast(), size) };
    let Ok(n) = usize::try_from(n) else {
        return Err(std::io::Error::last_os_error());
    };
    if n == 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n.min(buf.len()));
    let path = PathBuf::from(std::ffi::OsString::from_vec(buf));
    let file = std::fs::metadata(&path)?;
    Ok((path, file))
}

/// A process's user ids and whether something traces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Creds {
    pub ruid: u32,
    pub euid: u32,
    pub traced: bool,
}

/// `PROC_FLAG_TRACED` of `pbi_flags` (`<sys/proc_info.h>`): the process is being traced.
const PROC_FLAG_TRACED: u32 = 2;

/// The variables that make dyld put other code into a program (ignored in a setuid one and in
/// the system's protected programs); each holds paths separated by `:`.
pub const LOADER_VARS: &[&str] = &[
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
    "DYLD_FRAMEWORK_PATH",
    "DYLD_FALLBACK_LIBRARY_PATH",
    "DYLD_FALLBACK_FRAMEWORK_PATH",
];

/// `pid`'s user ids and whether it is traced (`PROC_PIDTBSDINFO`, readable for any process).
pub fn creds(pid: i32) -> Option<Creds> {
    let info = bsdinfo(pid)?;
    Some(Creds {
        ruid: info.pbi_ruid,
        euid: info.pbi_uid,
        traced: info.pbi_flags & PROC_FLAG_TRACED != 0,
    })
}

/// The variables `pid` was started with; `None` where they cannot be read (another user's
/// process).
pub fn env_vars(pid: i32) -> Option<Vec<(String, String)>> {
    with_procargs2(pid, |buf| {
        procargs::env_entries(buf)
            .into_iter()
            .map(|kv| {
                let text = String::from_utf8_lossy(kv);
                match text.split_once('=') {
                    Some((name, value)) => (name.to_string(), value.to_string()),
                    None => (text.into_owned(), String::new()),
                }
            })
            .collect()
    })
}

/// `pid`'s arguments; `None` where they cannot be read (another user's process) or are none.
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    with_procargs2(pid, |buf| {
        procargs::arguments(buf)
            .into_iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<String>>()
    })
    .filter(|args| !args.is_empty())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id() as i32;
        let s = live(me).unwrap();
        assert_eq!(s.pid, me);
        assert_eq!(stat(me), Some(s));
        assert!(s.start_time > StartTime::UNKNOWN);
        assert!(scan().iter().any(|p| p.pid == me));
        assert!(children(s.ppid).contains(&me));
        let here = std::env::current_dir().and_then(std::fs::canonicalize).ok();
        assert_eq!(cwd(me as u32), here);
        if let Ok(path) = std::env::var("PATH") {
            assert!(has_env_entry(me, &format!("PATH={path}")));
            let vars = env_vars(me).unwrap();
            assert!(vars.contains(&("PATH".to_string(), path.clone())));
            assert_eq!(env_entry_after(me, b"PATH="), Some(path.into_bytes()));
        }
        let (path, _) = exe(me).unwrap();
        assert_eq!(Some(path), std::env::current_exe().ok());
        assert_eq!(cmdline(me).unwrap().len(), std::env::args().count());
        // SAFETY: getuid and geteuid have no preconditions.
        let ids = unsafe { (libc::getuid(), libc::geteuid()) };
        let c = creds(me).unwrap();
        assert_eq!((c.ruid, c.euid), ids);
    }
}
