//! The processes of the machine, from one Tool Help snapshot: what the daemon's process facts
//! and `cubactl`'s both start from.

use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};

/// One process of a Tool Help snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    /// The pid of the process that started it, as the snapshot gives it: Windows keeps it after
    /// that process ends, and may have given it to another since.
    pub ppid: u32,
    /// Its program's file name (`cmd.exe`); empty when the snapshot has none.
    pub exe: String,
}

/// Every process at one moment, from one Tool Help snapshot
/// (`CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS)`), the idle process (pid 0) included; empty
/// when no snapshot can be taken. The daemon's and `cubactl`'s process facts both start here.
pub fn processes() -> Vec<Process> {
    use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
    use windows_sys::Win32::System::Diagnostics::ToolHelp::{
        CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W,
        TH32CS_SNAPPROCESS,
    };
    // SAFETY: plain values; INVALID_HANDLE_VALUE (or null) on failure.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) };
    if raw.is_null() || raw == INVALID_HANDLE_VALUE {
        return Vec::new();
    }
    // SAFETY: a handle just created, owned (and closed) from here.
    let snap = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut entry = PROCESSENTRY32W {
        dwSize: std::mem::size_of::<PROCESSENTRY32W>() as u32,
        ..Default::default()
    };
    let mut out = Vec::new();
    // SAFETY: the snapshot is open; `entry` is writable and its dwSize says how big it is, as
    // the walk requires.
    let mut more = unsafe { Process32FirstW(snap.as_raw_handle(), &mut entry) } != 0;
    while more {
        let len = entry
            .szExeFile
            .iter()
            .position(|c| *c == 0)
            .unwrap_or(entry.szExeFile.len());
        out.push(Process {
            pid: entry.th32ProcessID,
            ppid: entry.th32ParentProcessID,
            exe: String::from_utf16_lossy(&entry.szExeFile[..len]),
        });
        // SAFETY: as for Process32FirstW.
        more = unsafe { Process32NextW(snap.as_raw_handle(), &mut entry) } != 0;
    }
    out
}
