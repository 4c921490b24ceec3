//! Terminals on Windows: a pseudo console (ConPTY) per `tty` command.
//!
//! The daemon writes the child's input to one pipe and reads what its screen shows, as VT
//! text, from another: the same bytes the screen model reads from a Unix terminal. Keys map as
//! on a terminal (`Enter` is CR, `C-c` is 0x03, which the console turns into a Ctrl-C event).
//! The output pipe stays open while the pseudo console lives, even after the child ends: the
//! supervisor closes the console at the child's exit and then reads to the end.
//!
//! std's `Command` cannot attach a pseudo console (that takes a thread-attribute list), so the
//! process is created here with `CreateProcessW`: suspended, put in its job, then resumed.

use std::fs::File;
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::Console::{
    ClosePseudoConsole, CreatePseudoConsole, ResizePseudoConsole, COORD, HPCON,
};
use windows_sys::Win32::System::Pipes::CreatePipe;
use windows_sys::Win32::System::Threading::{
    CreateProcessW, DeleteProcThreadAttributeList, InitializeProcThreadAttributeList, ResumeThread,
    UpdateProcThreadAttribute, CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT,
    EXTENDED_STARTUPINFO_PRESENT, PROCESS_INFORMATION, PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE,
    STARTF_USESTDHANDLES, STARTUPINFOEXW,
};

use super::job::Job;

/// A pseudo console and the daemon's ends of its pipes.
pub struct Pty {
    console: Option<HPCON>,
    /// What is written here is typed into the console.
    pub input: File,
    /// The console's output, VT text.
    pub output: File,
}

// The console handle is an opaque pointer the console host owns; any thread may use it.
unsafe impl Send for Pty {}
unsafe impl Sync for Pty {}

impl std::fmt::Debug for Pty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pty")
            .field("open", &self.console.is_some())
            .finish()
    }
}

/// A process started on a pseudo console.
#[derive(Debug)]
pub struct PtyChild {
    pub pid: u32,
    pub process: OwnedHandle,
}

fn size(cols: u16, rows: u16) -> COORD {
    COORD {
        X: i16::try_from(cols).unwrap_or(i16::MAX),
        Y: i16::try_from(rows).unwrap_or(i16::MAX),
    }
}

/// An anonymous pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedHandle, OwnedHandle)> {
    let (mut read, mut write): (HANDLE, HANDLE) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: both handles are written on success; no attributes: not inheritable.
    if unsafe { CreatePipe(&mut read, &mut write, std::ptr::null(), 0) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two handles just created, owned from here.
    Ok(unsafe {
        (
            OwnedHandle::from_raw_handle(read),
            OwnedHandle::from_raw_handle(write),
        )
    })
}

impl Pty {
    /// A pseudo console of `cols` × `rows`.
    pub fn open(cols: u16, rows: u16) -> io::Result<Pty> {
        let (console_in, input) = pipe()?;
        let (output, console_out) = pipe()?;
        let mut console: HPCON = 0;
        // SAFETY: the console duplicates the two handles it is given; ours are closed after.
        let hr = unsafe {
            CreatePseudoConsole(
                size(cols, rows),
                console_in.as_raw_handle(),
                console_out.as_raw_handle(),
                0,
                &mut console,
            )
        };
        if hr < 0 {
            return Err(io::Error::from_raw_os_error(hr));
        }
        Ok(Pty {
            console: Some(console),
            input: File::from(input),
            output: File::from(output),
        })
    }

    /// Tells the console (and the program on it) its new size.
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let Some(console) = self.console else {
            return Err(io::Error::other("the pseudo console is closed"));
        };
        // SAFETY: a console this value owns, not yet closed.
        let hr = unsafe { ResizePseudoConsole(console, size(cols, rows)) };
        if hr < 0 {
            return Err(io::Error::from_raw_os_error(hr));
        }
        Ok(())
    }

    /// Closes the console: the programs still on it lose it, and its output ends once what it
    /// had is read.
    pub fn close(&mut self) {
        if let Some(console) = self.console.take() {
            // SAFETY: a console this value owned; taken, so closed once.
            unsafe { ClosePseudoConsole(console) };
        }
    }

    /// Starts `command_line` (see `win_shell::command_line`) on this console, in `job`, in
    /// `cwd`, with `env` (already merged and sorted; `None`: the daemon's).
    pub fn spawn(
        &self,
        command_line: &str,
        cwd: Option<&Path>,
        env: Option<&[(String, String)]>,
        job: &Job,
    ) -> io::Result<PtyChild> {
        let Some(console) = self.console else {
            return Err(io::Error::other("the pseudo console is closed"));
        };
        let mut attributes = Attributes::new()?;
        // SAFETY: the list was initialised for one attribute; the console value lives in
        // `self` for the call, as the attribute's documentation requires.
        let ok = unsafe {
            UpdateProcThreadAttribute(
                attributes.list(),
                0,
                PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE as usize,
                console as *const std::ffi::c_void,
                std::mem::size_of::<HPCON>(),
                std::ptr::null_mut(),
                std::ptr::null(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        let mut startup: STARTUPINFOEXW = unsafe { std::mem::zeroed() };
        startup.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
        // No standard handles of the daemon's: without this flag a child of a daemon whose
        // own stdio is redirected takes those instead of the console's.
        startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
        startup.lpAttributeList = attributes.list();
        let mut line: Vec<u16> = command_line.encode_utf16().chain(Some(0)).collect();
        let dir: Option<Vec<u16>> = cwd.map(|d| wide(&d.to_string_lossy()));
        let block: Option<Vec<u16>> = env.map(env_block);
        let mut info: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: every pointer is to a live, NUL-terminated buffer above (or null); no
        // handles are inherited: the console gives the child its stdio.
        let ok = unsafe {
            CreateProcessW(
                std::ptr::null(),
                line.as_mut_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
                EXTENDED_STARTUPINFO_PRESENT | CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT,
                block
                    .as_ref()
                    .map_or(std::ptr::null(), |b| b.as_ptr().cast()),
                dir.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()),
                &startup.StartupInfo,
                &mut info,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: two handles CreateProcessW just returned, owned from here.
        let (process, thread) = unsafe {
            (
                OwnedHandle::from_raw_handle(info.hProcess),
                OwnedHandle::from_raw_handle(info.hThread),
            )
        };
        if let Err(e) = job.assign(&process) {
            job_kill_unassigned(&process);
            return Err(e);
        }
        // SAFETY: the main thread of the process just created, suspended.
        if unsafe { ResumeThread(thread.as_raw_handle()) } == u32::MAX {
            let e = io::Error::last_os_error();
            let _ = job.kill(1);
            return Err(e);
        }
        Ok(PtyChild {
            pid: info.dwProcessId,
            process,
        })
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        self.close();
    }
}

/// A process that could not be put in its job never ran: it is ended here.
fn job_kill_unassigned(process: &OwnedHandle) {
    // SAFETY: a process handle this daemon holds, created suspended.
    unsafe { windows_sys::Win32::System::Threading::TerminateProcess(process.as_raw_handle(), 1) };
}

/// The thread-attribute list of one attribute, freed on drop.
struct Attributes {
    buf: Vec<u64>,
}

impl Attributes {
    fn new() -> io::Result<Attributes> {
        let mut bytes = 0usize;
        // SAFETY: a size query (null list): it writes the size needed.
        unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), 1, 0, &mut bytes) };
        let mut a = Attributes {
            buf: vec![0u64; bytes.div_ceil(8).max(1)],
        };
        // SAFETY: a buffer of at least `bytes`, aligned for the list.
        if unsafe { InitializeProcThreadAttributeList(a.list(), 1, 0, &mut bytes) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(a)
    }

    fn list(&mut self) -> *mut std::ffi::c_void {
        self.buf.as_mut_ptr().cast()
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, deleted once.
        unsafe { DeleteProcThreadAttributeList(self.list()) };
    }
}

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(Some(0)).collect()
}

/// `NAME=value\0…\0\0`, the block `CREATE_UNICODE_ENVIRONMENT` takes.
fn env_block(env: &[(String, String)]) -> Vec<u16> {
    let mut block: Vec<u16> = env
        .iter()
        .flat_map(|(k, v)| format!("{k}={v}\0").encode_utf16().collect::<Vec<_>>())
        .collect();
    if block.is_empty() {
        block.push(0);
    }
    block.push(0);
    block
}

#[cfg(test)]
mod tests;
