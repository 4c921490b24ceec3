//! Process facts on Windows: the live processes, each one's parent and program name, from one
//! Tool Help snapshot (`CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS)`), and a process's start
//! (its creation time, `GetProcessTimes`). There are no zombies (an ended process leaves the
//! snapshot at once) and no process groups as POSIX has them: each command starts as a process
//! group of its own (`CREATE_NEW_PROCESS_GROUP`), so a process's group is itself. Another
//! process's environment and working directory are not read here.
//!
//! A parent's pid is not a live link: Windows keeps the pid a process was started by
//! (`th32ParentProcessID`) after that parent ends, and may hand the pid to a new process. Only
//! the start times tell the two apart: a process that started after the child cannot be its
//! parent. Such a parent (and one that has ended) is reported as 0, no parent, as a POSIX
//! orphan is no longer its dead parent's child.

use std::collections::HashMap;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::PathBuf;

use windows_sys::Win32::Foundation::FILETIME;
use windows_sys::Win32::System::Threading::{
    GetProcessTimes, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

use crate::platform::StartTime;

/// What the system says about a process that we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    /// Its parent, if that is alive and started before it; else 0.
    pub ppid: i32,
    /// The pid itself: each command starts as a process group of its own.
    pub pgrp: i32,
    /// Creation time in 100-ns ticks since 1601: with the pid, identifies a process.
    pub start_time: StartTime,
}

/// One process of a snapshot.
struct Entry {
    pid: i32,
    /// As the snapshot gives it: the pid of the process that started it, alive or not.
    ppid: i32,
    exe: String,
}

/// Every live process, with the pid of its creator and its program's file name; empty when no
/// snapshot can be taken (the walk is `cuba_protocol::win::processes`, shared with `cubactl`).
fn snapshot() -> Vec<Entry> {
    cuba_protocol::win::processes()
        .into_iter()
        .filter_map(|p| {
            let (Ok(pid), Ok(ppid)) = (i32::try_from(p.pid), i32::try_from(p.ppid)) else {
                return None;
            };
            // Pid 0 is the idle "process", not one.
            (pid > 0).then_some(Entry {
                pid,
                ppid,
                exe: p.exe,
            })
        })
        .collect()
}

/// The creation time of process `pid`, as 100-ns ticks since 1601 (a `FILETIME`);
/// `StartTime::UNKNOWN` when it cannot be read (no such process, or one we may not query).
pub fn start_time_of(pid: i32) -> StartTime {
    let Ok(id) = u32::try_from(pid) else {
        return StartTime::UNKNOWN;
    };
    if id == 0 {
        return StartTime::UNKNOWN;
    }
    // SAFETY: plain values; a null handle is the error.
    let raw = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, id) };
    if raw.is_null() {
        return StartTime::UNKNOWN;
    }
    // SAFETY: a handle just opened, owned (and closed) from here.
    let process = unsafe { OwnedHandle::from_raw_handle(raw) };
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: a process handle with the query right, and four FILETIMEs to write.
    let ok = unsafe {
        GetProcessTimes(
            process.as_raw_handle(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    } != 0;
    if !ok {
        return StartTime::UNKNOWN;
    }
    StartTime(u64::from(created.dwHighDateTime) << 32 | u64::from(created.dwLowDateTime))
}

/// Whether `parent`, started at `parent_start`, can be the parent of a process started at
/// `child_start`: a process that started after the child is a reused pid, not its parent.
/// Unknown times are given the benefit of the doubt.
fn may_be_parent(parent_start: StartTime, child_start: StartTime) -> bool {
    parent_start == StartTime::UNKNOWN
        || child_start == StartTime::UNKNOWN
        || parent_start <= child_start
}

/// `ppid` as a process's parent: itself if that process is `alive` and did not start after
/// the child (its start read by `parent_start`), else 0. A parent that ended, or whose pid is
/// another process's now, is none.
fn parent(
    ppid: i32,
    alive: bool,
    parent_start: impl FnOnce() -> StartTime,
    child_start: StartTime,
) -> i32 {
    if ppid > 0 && alive && may_be_parent(parent_start(), child_start) {
        ppid
    } else {
        0
    }
}

/// The stats of the snapshot's processes, each parent checked against the live ones and their
/// start times (read once per process).
fn stats(entries: &[Entry]) -> Vec<ProcStat> {
    let mut times: HashMap<i32, StartTime> = HashMap::new();
    let alive: std::collections::HashSet<i32> = entries.iter().map(|e| e.pid).collect();
    let mut time = |pid: i32| *times.entry(pid).or_insert_with(|| start_time_of(pid));
    entries
        .iter()
        .map(|e| {
            let start_time = time(e.pid);
            let ppid = parent(e.ppid, alive.contains(&e.ppid), || time(e.ppid), start_time);
            ProcStat {
                pid: e.pid,
                ppid,
                pgrp: e.pid,
                start_time,
            }
        })
        .collect()
}

/// The process `pid`.
pub fn stat(pid: i32) -> Option<ProcStat> {
    if pid <= 0 {
        return None;
    }
    let entries = snapshot();
    let entry = entries.iter().find(|e| e.pid == pid)?;
    let start_time = start_time_of(pid);
    let alive = entries.iter().any(|e| e.pid == entry.ppid);
    let ppid = parent(entry.ppid, alive, || start_time_of(entry.ppid), start_time);
    Some(ProcStat {
        pid,
        ppid,
        pgrp: pid,
        start_time,
    })
}

/// The process `pid` if it is alive: the same as [`stat`], as Windows has no zombies.
pub fn live(pid: i32) -> Option<ProcStat> {
    stat(pid)
}

/// Every live process on the machine.
pub fn scan() -> Vec<ProcStat> {
    stats(&snapshot())
}

/// The children of `pid` (those it started that are alive, not ones of a process that had its
/// pid before it).
pub fn children(pid: i32) -> Vec<i32> {
    if pid <= 0 {
        return Vec::new();
    }
    let entries = snapshot();
    if !entries.iter().any(|e| e.pid == pid) {
        return Vec::new();
    }
    let parent_start = start_time_of(pid);
    entries
        .iter()
        .filter(|e| e.ppid == pid && e.pid != pid)
        .filter(|e| may_be_parent(parent_start, start_time_of(e.pid)))
        .map(|e| e.pid)
        .collect()
}

/// The daemon's own children.
pub fn own_children() -> Vec<i32> {
    children(std::process::id() as i32)
}

/// The file name of the program `pid` runs (`cmd.exe`), as the snapshot gives it.
pub fn name(pid: i32) -> Option<String> {
    snapshot()
        .into_iter()
        .find(|e| e.pid == pid)
        .map(|e| e.exe)
        .filter(|n| !n.is_empty())
}

/// Never: another process's environment is not read on Windows.
pub fn has_env_entry(_pid: i32, _entry: &str) -> bool {
    false
}

/// Never: another process's environment is not read on Windows.
pub fn env_entry_after(_pid: i32, _prefix: &[u8]) -> Option<Vec<u8>> {
    None
}

/// Never: another process's working directory is not read on Windows.
pub fn cwd(_pid: u32) -> Option<PathBuf> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_start_is_not_a_parent() {
        assert!(may_be_parent(StartTime(5), StartTime(9)));
        assert!(may_be_parent(StartTime(9), StartTime(9)));
        assert!(!may_be_parent(StartTime(10), StartTime(9)));
        assert!(may_be_parent(StartTime::UNKNOWN, StartTime(9)));
    }

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id() as i32;
        let s = live(me).expect("this process");
        assert_eq!((s.pid, s.pgrp), (me, me));
        assert!(s.start_time > StartTime::UNKNOWN);
        assert_eq!(s.start_time, start_time_of(me));
        assert!(scan().iter().any(|p| p.pid == me));
        if s.ppid > 0 {
            assert!(children(s.ppid).contains(&me));
        }
        let exe = name(me).expect("name").to_ascii_lowercase();
        assert!(exe.ends_with(".exe"), "{exe}");
    }

    #[test]
    fn a_child_is_seen_with_its_parent() {
        let mut child = std::process::Command::new("cmd.exe")
            .args(["/d", "/c", "ping -n 3 127.0.0.1 >NUL"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let pid = child.id() as i32;
        let seen = own_children().contains(&pid);
        let parent = stat(pid).map(|s| s.ppid);
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen);
        assert_eq!(parent, Some(std::process::id() as i32));
    }
}
