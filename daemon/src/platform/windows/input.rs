//! Whether a process waits for input on a pipe, on Windows: the pipe's pending read.
//!
//! A read waiting on a pipe's read end takes its size out of the write end's quota: with no
//! data in the pipe, `WriteQuotaAvailable` (as the write end sees it, through
//! `NtQueryInformationFile(FilePipeLocalInformation)`) is smaller than the buffer while a read
//! waits, and the whole buffer when none does. Cygwin's `select` tells a writable pipe this
//! way. The daemon holds the write end of every pipe child's stdin, so it can ask without
//! touching the child.
//!
//! Windows does not say which process a read belongs to, so the supervisor's look
//! ([`Waiting`]) also asks that the tree used no CPU since its last look: a program busy
//! elsewhere while a thread of it reads is not waiting for an answer. A pseudo console has no
//! such signal (its input is read by the console host at all times), so a terminal command is
//! never reported waiting on Windows.

use std::fs::File;
use std::io::{self, Write};
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

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

/// The daemon's end of a child's stdin, as the thread writing it holds it: the only strong
/// reference, so the pipe closes (the child reads end of file) as soon as that thread lets go;
/// the supervisor's [`Waiting`] looks at it through a weak one.
pub struct StdinEnd(Arc<File>);

impl StdinEnd {
    pub fn new(write_end: OwnedHandle) -> StdinEnd {
        StdinEnd(Arc::new(File::from(write_end)))
    }
}

impl Write for StdinEnd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

/// A stdin pipe as the supervisor looks at it once output has been quiet: whether a read waits
/// on it while the tree uses no CPU.
#[derive(Debug)]
pub struct Waiting {
    /// The write end; gone once the writer has closed it (nobody can answer then).
    pipe: Weak<File>,
    /// The tree's CPU time at the last look, in ns ([`NO_LOOK`] before the first).
    cpu_ns: AtomicU64,
}

/// No CPU time seen yet: the first look only takes the measure.
const NO_LOOK: u64 = u64::MAX;

impl Waiting {
    /// The look at `end`'s pipe; `None` under Wine, whose pipes report no write quota and
    /// whose jobs no CPU time: every look there would see a read waiting in an idle tree.
    pub fn on(end: &StdinEnd) -> Option<Waiting> {
        cuba_protocol::win::wine()
            .is_none()
            .then(|| Waiting::of(end))
    }

    fn of(end: &StdinEnd) -> Waiting {
        Waiting {
            pipe: Arc::downgrade(&end.0),
            cpu_ns: AtomicU64::new(NO_LOOK),
        }
    }

    /// Whether the tree looks blocked reading its stdin now: a read waits on the pipe, nothing
    /// is in it, and the tree (its job's CPU time now: `cpu_ns`) used no CPU since the last
    /// look. The first look after a burst of work only takes the measure.
    pub fn blocked(&self, cpu_ns: Option<u64>) -> bool {
        self.look(cpu_ns, |end| read_pending(end))
    }

    fn look(&self, cpu_ns: Option<u64>, pending: impl FnOnce(&File) -> io::Result<bool>) -> bool {
        let before = self
            .cpu_ns
            .swap(cpu_ns.unwrap_or(NO_LOOK), Ordering::Relaxed);
        let idle = cpu_ns.is_some_and(|now| now != NO_LOOK && now == before);
        let Some(end) = self.pipe.upgrade() else {
            return false;
        };
        // A pipe whose state cannot be read says nothing: not waiting.
        idle && pending(&end).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_wait_is_a_pending_read_in_a_tree_that_used_no_cpu_since_the_last_look() {
        let (write, _read) = stdin_pipe().expect("pipe");
        let end = StdinEnd::new(write);
        let w = Waiting::of(&end);
        let pending = |_: &File| -> io::Result<bool> { Ok(true) };
        // The first look only measures; then the same CPU time is idle, a new one is not.
        assert!(!w.look(Some(10), pending));
        assert!(w.look(Some(10), pending));
        assert!(!w.look(Some(25), pending));
        assert!(w.look(Some(25), pending));
        // No read waiting, or a pipe whose state cannot be read: not waiting.
        assert!(!w.look(Some(25), |_| Ok(false)));
        assert!(!w.look(Some(25), |_| Err(io::Error::other("no state"))));
        // A job that cannot be asked: never idle.
        assert!(!w.look(None, pending));
        assert!(!w.look(None, pending));
        // Once the writer has closed the pipe nobody can answer: the pipe is not even asked.
        drop(end);
        assert!(!w.look(Some(25), |_| panic!("a closed pipe asked")));
    }

    #[test]
    fn the_look_keeps_no_pipe_open() {
        // `more` copies its stdin until end of file: it ends once the writer lets go, though a
        // look at the pipe still exists.
        let (write, read) = stdin_pipe().expect("pipe");
        let mut child = Command::new("cmd.exe")
            .args(["/d", "/c", "more"])
            .stdin(Stdio::from(read))
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut end = StdinEnd::new(write);
        let look = Waiting::of(&end);
        end.write_all(b"through the pipe\r\n").expect("write");
        drop(end);
        let deadline = Instant::now() + Duration::from_secs(20);
        let ended = loop {
            match child.try_wait().expect("wait") {
                Some(_) => break true,
                None if Instant::now() > deadline => break false,
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        if !ended {
            let _ = child.kill();
        }
        let out = child.wait_with_output().expect("output");
        assert!(ended, "the child never read end of file");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("through the pipe"),
            "{out:?}"
        );
        assert!(!look.blocked(Some(0)) && !look.blocked(Some(0)));
    }

    #[test]
    fn under_wine_no_look_is_made() {
        let (write, _read) = stdin_pipe().expect("pipe");
        let end = StdinEnd::new(write);
        assert_eq!(
            Waiting::on(&end).is_some(),
            cuba_protocol::win::wine().is_none()
        );
    }

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
