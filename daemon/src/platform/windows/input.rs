//! Whether a process waits for input on a pipe, on Windows: the pipe's pending read.
//!
//! A read waiting on a pipe's read end takes its size out of the write end's quota: with no
//! data in the pipe, `WriteQuotaAvailable` (as the write end sees it, through
//! `NtQueryInformationFile(FilePipeLocalInformation)`) is smaller than the buffer while a read
//! waits, and the whole buffer when none does. Cygwin's `select` tells a writable pipe this
//! way. The daemon holds the write end of every pipe child's stdin, so it can ask without
//! touching the child.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};

/// `FILE_PIPE_LOCAL_INFORMATION`.
#[repr(C)]
#[derive(Debug, Default)]
struct PipeLocal {
    named_pipe_type: u32,
    named_pipe_configuration: u32,
    maximum_instances: u32,
    current_instances: u32,
    inbound_quota: u32,
    read_data_available: u32,
    outbound_quota: u32,
    write_quota_available: u32,
    named_pipe_state: u32,
    named_pipe_end: u32,
}

#[repr(C)]
struct IoStatus {
    status: isize,
    information: usize,
}

const FILE_PIPE_LOCAL_INFORMATION: u32 = 24;

#[link(name = "ntdll")]
unsafe extern "system" {
    fn NtQueryInformationFile(
        file: *mut std::ffi::c_void,
        status: *mut IoStatus,
        info: *mut std::ffi::c_void,
        length: u32,
        class: u32,
    ) -> i32;
}

/// The pipe's state as its end `pipe` sees it.
fn local(pipe: &impl AsRawHandle) -> io::Result<PipeLocal> {
    let mut info = PipeLocal::default();
    let mut status = IoStatus {
        status: 0,
        information: 0,
    };
    // SAFETY: a pipe handle valid for the call; the struct and its size are this class's.
    let rc = unsafe {
        NtQueryInformationFile(
            pipe.as_raw_handle(),
            &mut status,
            (&mut info as *mut PipeLocal).cast(),
            std::mem::size_of::<PipeLocal>() as u32,
            FILE_PIPE_LOCAL_INFORMATION,
        )
    };
    if rc < 0 {
        return Err(io::Error::other(format!(
            "NtQueryInformationFile: status {rc:#x}"
        )));
    }
    Ok(info)
}

/// A child's stdin: (the daemon's write end, the child's read end). A named pipe of this
/// process, so the write end may read the pipe's state (an anonymous pipe's write end, as std
/// makes it, may not: `STATUS_ACCESS_DENIED`). Neither end is inheritable; std duplicates the
/// child's end into it.
pub fn stdin_pipe() -> io::Result<(OwnedHandle, OwnedHandle)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use windows_sys::Win32::Foundation::{GENERIC_READ, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::Storage::FileSystem::{
        CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, OPEN_EXISTING, PIPE_ACCESS_DUPLEX,
    };
    use windows_sys::Win32::System::Pipes::{
        CreateNamedPipeW, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE, PIPE_WAIT,
    };
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        r"\\.\pipe\cuba-exec-stdin-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let wide: Vec<u16> = name.encode_utf16().chain(Some(0)).collect();
    // SAFETY: a NUL-terminated name; default security (this user); one instance.
    let write = unsafe {
        CreateNamedPipeW(
            wide.as_ptr(),
            // Duplex, though only written: an outbound-only end may not read the pipe's state.
            PIPE_ACCESS_DUPLEX | FILE_FLAG_FIRST_PIPE_INSTANCE,
            PIPE_TYPE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
            1,
            PIPE_BUFFER,
            PIPE_BUFFER,
            0,
            std::ptr::null(),
        )
    };
    if write == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle just created, owned from here.
    let write = unsafe { OwnedHandle::from_raw_handle(write) };
    // SAFETY: as above; the client end, read-only.
    let read = unsafe {
        CreateFileW(
            wide.as_ptr(),
            GENERIC_READ,
            0,
            std::ptr::null(),
            OPEN_EXISTING,
            0,
            std::ptr::null_mut(),
        )
    };
    if read == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle just opened, owned from here.
    Ok((write, unsafe { OwnedHandle::from_raw_handle(read) }))
}

/// A stdin pipe's buffer, as on Linux after the daemon grows it.
const PIPE_BUFFER: u32 = 64 * 1024;

/// A read waits on the pipe whose write end is `write_end`, and nothing is in it to read.
pub fn read_pending(write_end: &impl AsRawHandle) -> io::Result<bool> {
    let info = local(write_end)?;
    let buffer = info.outbound_quota.max(info.inbound_quota);
    Ok(info.read_data_available == 0 && info.write_quota_available < buffer)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// Polls `pending` up to 10 s for `want` (the reader starts at its own pace).
    fn becomes(pipe: &impl AsRawHandle, want: bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if read_pending(pipe).expect("pipe state") == want {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_stdin_pipe_carries_what_is_written_to_the_child() {
        let (write, read) = stdin_pipe().expect("pipe");
        let child = Command::new("cmd.exe")
            .args(["/d", "/c", "more"])
            .stdin(Stdio::from(read))
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = std::fs::File::from(write);
        stdin.write_all(b"through the pipe\r\n").expect("write");
        drop(stdin);
        let out = child.wait_with_output().expect("wait");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("through the pipe"),
            "{out:?}"
        );
        assert!(read_pending_state_is_readable());
    }

    /// The write end may read the pipe's state (the access an outbound-only end lacks).
    fn read_pending_state_is_readable() -> bool {
        let (write, _read) = stdin_pipe().expect("pipe");
        local(&write).is_ok()
    }

    #[test]
    #[ignore = "Wine 8 reports no write quota on a pipe (always 0), pending read or not; run on Windows"]
    fn a_read_waiting_on_stdin_is_seen_from_the_write_end() {
        // `more` reads its stdin and blocks there until a line comes.
        let (write, read) = stdin_pipe().expect("pipe");
        let mut child = Command::new("cmd.exe")
            .args(["/d", "/c", "more"])
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        let pending = becomes(&write, true);

        let mut stdin = std::fs::File::from(write);
        stdin.write_all(b"line\r\n").expect("write");
        drop(stdin);
        let _ = child.wait();
        assert!(pending, "no pending read seen");
    }

    #[test]
    #[ignore = "Wine 8 reports no write quota on a pipe (always 0), pending read or not; run on Windows"]
    fn a_program_that_never_reads_has_no_pending_read() {
        let (write, read) = stdin_pipe().expect("pipe");
        let mut child = Command::new("cmd.exe")
            .args(["/d", "/c", "ping -n 3 127.0.0.1 >NUL"])
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(300));
        let pending = read_pending(&write).expect("pipe state");

        let _ = child.kill();
        let _ = child.wait();
        assert!(!pending);
    }
}
