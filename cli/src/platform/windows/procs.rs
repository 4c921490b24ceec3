//! Processes from a Toolhelp snapshot (`CreateToolhelp32Snapshot`: pid and parent pid), with
//! the CPU time (`GetProcessTimes`) and resident memory (the working set,
//! `K32GetProcessMemoryInfo`) of each process this user may open.
//!
//! What Windows lacks or this leaves out: a process that cannot be opened (another user's, a
//! protected one) counts as running with no CPU time and no memory; a parent pid is not cleared
//! when the parent exits, so a "parent" created after its child (its pid reused) is ignored;
//! and [`marked`] finds nothing, since another process's environment is readable only from its
//! memory (its PEB), which is not done here: a process that left its tree is not found.

use std::collections::HashMap;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};

use windows_sys::Win32::Foundation::{FILETIME, STILL_ACTIVE};
use windows_sys::Win32::System::ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, GetProcessTimes, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    PROCESS_VM_READ,
};

use crate::platform::ProcStat;

/// Every process in the snapshot.
pub fn all() -> HashMap<i32, ProcStat> {
    let measured: HashMap<u32, (u32, Option<Measured>)> = entries()
        .into_iter()
        .map(|(pid, ppid)| (pid, (ppid, measure(pid))))
        .collect();
    let created = |pid: u32| measured.get(&pid)?.1.as_ref().map(|m| m.created);
    measured
        .iter()
        .filter_map(|(&pid, &(ppid, ref m))| {
            // A parent younger than its child has only inherited the pid of the real one.
            let stale = matches!((created(ppid), created(pid)), (Some(p), Some(c)) if p > c);
            let ppid = if stale { 0 } else { ppid };
            Some((i32::try_from(pid).ok()?, stat_of(ppid, m.as_ref())?))
        })
        .collect()
}

pub fn stat(pid: i32) -> Option<ProcStat> {
    let id = u32::try_from(pid).ok()?;
    let (_, ppid) = entries().into_iter().find(|&(p, _)| p == id)?;
    stat_of(ppid, measure(id).as_ref())
}

/// Nothing: see the module's doc.
pub fn marked(_needle: &str) -> HashMap<u64, Vec<i32>> {
    HashMap::new()
}

fn stat_of(ppid: u32, m: Option<&Measured>) -> Option<ProcStat> {
    Some(ProcStat {
        ppid: i32::try_from(ppid).ok()?,
        zombie: m.is_some_and(|m| m.exited),
        cpu_ns: m.map_or(0, |m| m.cpu_ns),
        rss_bytes: m.map_or(0, |m| m.rss_bytes),
    })
}

/// `(pid, parent pid)` of every process at one moment (`cuba_protocol::win::processes`, the
/// walk the daemon shares).
fn entries() -> Vec<(u32, u32)> {
    cuba_protocol::win::processes()
        .into_iter()
        .map(|p| (p.pid, p.ppid))
        .collect()
}

/// What an open process handle tells.
struct Measured {
    /// Creation time, in 100 ns units since 1601.
    created: u64,
    exited: bool,
    cpu_ns: u64,
    rss_bytes: u64,
}

/// Opens `pid` to read its times and memory; `None` when it cannot be opened.
fn measure(pid: u32) -> Option<Measured> {
    // Memory needs VM_READ as well, which a process may refuse while it allows the rest.
    let process = open(pid, PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_VM_READ)
        .or_else(|| open(pid, PROCESS_QUERY_LIMITED_INFORMATION))?;
    let h = process.as_raw_handle();
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exit, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: the handle is open; each pointer is to a local FILETIME.
    if unsafe { GetProcessTimes(h, &mut created, &mut exit, &mut kernel, &mut user) } == 0 {
        return None;
    }
    let mut code = 0u32;
    // SAFETY: the handle is open; one u32 is written. A process that exited with code 259
    // (STILL_ACTIVE) looks alive: Windows' own caveat.
    let exited = unsafe { GetExitCodeProcess(h, &mut code) } != 0 && code != STILL_ACTIVE as u32;
    Some(Measured {
        created: ticks(created),
        exited,
        cpu_ns: (ticks(kernel) + ticks(user)).saturating_mul(100),
        rss_bytes: working_set(h),
    })
}

/// The working set in bytes; 0 when it cannot be read.
fn working_set(h: std::os::windows::io::RawHandle) -> u64 {
    // SAFETY: plain integers; all zero is a valid value for the call to overwrite.
    let mut counters: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    counters.cb = size;
    // SAFETY: the handle is open; the struct is writable for `size` bytes.
    match unsafe { K32GetProcessMemoryInfo(h, &mut counters, size) } {
        0 => 0,
        _ => counters.WorkingSetSize as u64,
    }
}

fn open(pid: u32, access: u32) -> Option<OwnedHandle> {
    // SAFETY: plain values; a null result is an error.
    let handle = unsafe { OpenProcess(access, 0, pid) };
    // SAFETY: a handle just opened, owned by the result and closed on its drop.
    (!handle.is_null()).then(|| unsafe { OwnedHandle::from_raw_handle(handle) })
}

fn ticks(t: FILETIME) -> u64 {
    (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)
}
