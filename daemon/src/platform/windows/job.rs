//! A command's whole tree as one Job Object: what a cgroup and a process group are on Linux.
//!
//! The child is created suspended, put in its job, then resumed, so not one instruction of it
//! (nor any process it starts) runs outside the job. The job is killed whole
//! (`TerminateJobObject`), and with the daemon (kill on close: if cubad dies, no tree is left
//! behind). Its accounting gives the tree's CPU time and its peak memory; its limits carry
//! `pids_max` (active processes) and `memory_max` (committed memory of the whole job). Exit
//! codes are read after the wait, so 259 (`STILL_ACTIVE`) is an exit code like any other.
//!
//! Handles: the child inherits only what std makes inheritable for its stdio; every handle the
//! daemon opens is non-inheritable (std's default), so nothing else leaks into a tree.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::os::windows::process::CommandExt;
use std::process::{Child, Command};

use windows_sys::Win32::Foundation::{ERROR_MORE_DATA, HANDLE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicAccountingInformation,
    JobObjectBasicProcessIdList, JobObjectExtendedLimitInformation, QueryInformationJobObject,
    SetInformationJobObject, TerminateJobObject, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_BASIC_PROCESS_ID_LIST, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JOB_OBJECT_LIMIT_ACTIVE_PROCESS, JOB_OBJECT_LIMIT_JOB_MEMORY,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    OpenThread, ResumeThread, CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED, THREAD_SUSPEND_RESUME,
};

/// The limits of a job: `pids_max` and `memory_max` as Windows has them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// Processes alive at once in the tree; a start beyond it fails.
    pub processes: Option<u32>,
    /// Committed memory of the whole tree, bytes.
    pub memory: Option<u64>,
}

/// What a job's accounting says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// User and kernel time of every process that was in it, nanoseconds.
    pub cpu_ns: u64,
    /// Processes in it now.
    pub active: u32,
    /// Processes ever in it.
    pub total: u32,
    /// The most committed memory it had at once, bytes.
    pub peak_memory: u64,
}

/// One command's tree.
#[derive(Debug)]
pub struct Job {
    handle: OwnedHandle,
}

impl Job {
    /// A job killed when its last handle closes, with `limits`.
    pub fn new(limits: Limits) -> io::Result<Job> {
        // SAFETY: no attributes, no name: an anonymous job; null is an error.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a handle just created, owned from here.
        let job = Job {
            handle: unsafe { OwnedHandle::from_raw_handle(raw) },
        };
        // SAFETY: a plain-data struct; all zero is its documented "no limit" value.
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        let basic = &mut info.BasicLimitInformation;
        basic.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        if let Some(n) = limits.processes {
            basic.LimitFlags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
            basic.ActiveProcessLimit = n;
        }
        if let Some(bytes) = limits.memory {
            basic.LimitFlags |= JOB_OBJECT_LIMIT_JOB_MEMORY;
            info.JobMemoryLimit = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        // SAFETY: the struct is the one this information class takes, with its size.
        let ok = unsafe {
            SetInformationJobObject(
                job.raw(),
                JobObjectExtendedLimitInformation,
                (&info as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
                std::mem::size_of_val(&info) as u32,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }

    fn raw(&self) -> HANDLE {
        self.handle.as_raw_handle()
    }

    /// Starts `cmd` inside the job: created suspended (and in a process group of its own, the
    /// target of a Ctrl-Break), assigned, then resumed. A child that cannot be assigned is
    /// killed before it ran.
    pub fn spawn(&self, cmd: &mut Command, flags: u32) -> io::Result<Child> {
        let mut child = cmd
            .creation_flags(flags | CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP)
            .spawn()?;
        if let Err(e) = self.assign(&child) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        if let Err(e) = resume(child.id()) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(child)
    }

    /// Puts a process (created suspended) in the job.
    pub fn assign(&self, process: &impl AsRawHandle) -> io::Result<()> {
        // SAFETY: both handles are valid for the call.
        if unsafe { AssignProcessToJobObject(self.raw(), process.as_raw_handle()) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Ends every process of the tree with `code`.
    pub fn kill(&self, code: u32) -> io::Result<()> {
        // SAFETY: the job's handle is valid for as long as `self`.
        if unsafe { TerminateJobObject(self.raw(), code) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The job's basic accounting (CPU times, process counts).
    fn accounting(&self) -> io::Result<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION> {
        // SAFETY: a plain-data struct, filled in by the call below.
        let mut basic: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the struct is the one this information class takes, with its size.
        let ok = unsafe {
            QueryInformationJobObject(
                self.raw(),
                JobObjectBasicAccountingInformation,
                (&mut basic as *mut JOBOBJECT_BASIC_ACCOUNTING_INFORMATION).cast(),
                std::mem::size_of_val(&basic) as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(basic)
    }

    /// How many processes are in the tree now.
    pub fn active(&self) -> io::Result<u32> {
        Ok(self.accounting()?.ActiveProcesses)
    }

    /// The pids of the processes in the tree now.
    pub fn pids(&self) -> io::Result<Vec<u32>> {
        // The list follows the two counts, at a word's alignment; the buffer is of words so
        // that it is aligned as the struct is.
        let word = std::mem::size_of::<usize>();
        let head =
            std::mem::offset_of!(JOBOBJECT_BASIC_PROCESS_ID_LIST, ProcessIdList).div_ceil(word);
        let mut room = 64usize;
        // Processes may join between two calls: a few tries, each with room for all seen.
        for _ in 0..8 {
            let mut buf = vec![0usize; head + room];
            let bytes = u32::try_from(buf.len() * word)
                .map_err(|_| io::Error::other("too many processes in the job"))?;
            // SAFETY: the buffer is `bytes` long and aligned for the struct this class takes.
            let ok = unsafe {
                QueryInformationJobObject(
                    self.raw(),
                    JobObjectBasicProcessIdList,
                    buf.as_mut_ptr().cast(),
                    bytes,
                    std::ptr::null_mut(),
                )
            } != 0;
            let error = io::Error::last_os_error();
            // SAFETY: the buffer holds at least the struct (its counts and one id), aligned,
            // and all of it is initialised (zeroed, then written by the call).
            let list = unsafe {
                buf.as_ptr()
                    .cast::<JOBOBJECT_BASIC_PROCESS_ID_LIST>()
                    .read()
            };
            if ok {
                let listed = (list.NumberOfProcessIdsInList as usize).min(room);
                return Ok(buf[head..head + listed]
                    .iter()
                    .map(|&id| id as u32)
                    .collect());
            }
            if error.raw_os_error() != Some(ERROR_MORE_DATA as i32) {
                return Err(error);
            }
            // Too small: the call said how many there are.
            room = (list.NumberOfAssignedProcesses as usize).max(room) * 2;
        }
        Err(io::Error::other("the job's processes kept changing"))
    }

    /// The tree's accounting now.
    pub fn usage(&self) -> io::Result<Usage> {
        let basic = self.accounting()?;
        // SAFETY: a plain-data struct, filled in by the call below.
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the struct is the one this information class takes, with its size.
        let ok = unsafe {
            QueryInformationJobObject(
                self.raw(),
                JobObjectExtendedLimitInformation,
                (&mut limits as *mut JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
                std::mem::size_of_val(&limits) as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        // Times are in 100 ns units.
        let ticks = basic.TotalUserTime.saturating_add(basic.TotalKernelTime);
        Ok(Usage {
            cpu_ns: u64::try_from(ticks).unwrap_or(0).saturating_mul(100),
            active: basic.ActiveProcesses,
            total: basic.TotalProcesses,
            peak_memory: limits.PeakJobMemoryUsed as u64,
        })
    }
}

/// Resumes every thread of process `pid` (a process created suspended has one).
fn resume(pid: u32) -> io::Result<()> {
    // SAFETY: a snapshot of every thread; an invalid handle (-1) is an error.
    let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snap.is_null() || snap as isize == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle just created, owned from here.
    let snap = unsafe { OwnedHandle::from_raw_handle(snap) };
    let mut entry = THREADENTRY32 {
        dwSize: std::mem::size_of::<THREADENTRY32>() as u32,
        ..Default::default()
    };
    let mut resumed = 0;
    // SAFETY: `entry` has its size set, as the walk requires; the snapshot is valid.
    let mut more = unsafe { Thread32First(snap.as_raw_handle(), &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: plain values; a null handle is skipped.
            let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
            if !thread.is_null() {
                // SAFETY: the thread handle just opened, owned and closed here.
                let thread = unsafe { OwnedHandle::from_raw_handle(thread) };
                // SAFETY: a valid thread handle with THREAD_SUSPEND_RESUME.
                if unsafe { ResumeThread(thread.as_raw_handle()) } != u32::MAX {
                    resumed += 1;
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snap.as_raw_handle(), &mut entry) } != 0;
    }
    match resumed {
        0 => Err(io::Error::other(format!(
            "cannot resume process {pid}: no thread of it found"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
pub(super) mod tests;
