//! Windows: who a user is (their SID), the daemon's pipe name, and the check that a pipe's far
//! end is a process of this user — what the socket's peer-uid check is on Unix.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::PathBuf;

use windows_sys::Win32::Foundation::{LocalFree, HANDLE};
use windows_sys::Win32::Security::Authorization::ConvertSidToStringSidW;
use windows_sys::Win32::Security::{GetTokenInformation, TokenUser, TOKEN_QUERY, TOKEN_USER};
use windows_sys::Win32::System::Pipes::GetNamedPipeServerProcessId;
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, OpenProcess, OpenProcessToken, PROCESS_QUERY_LIMITED_INFORMATION,
};

/// The pipe a user's daemon listens on: one per user, named by their SID, so two users of one
/// machine never meet (the pipe's security descriptor admits only its owner as well).
pub fn pipe_name(sid: &str) -> PathBuf {
    PathBuf::from(format!(r"\\.\pipe\cuba-exec-{sid}"))
}

/// This process's user, as a SID string (`S-1-5-21-…`).
pub fn user_sid() -> io::Result<String> {
    // SAFETY: the pseudo-handle of this process needs no closing and is always valid.
    sid_of_process(unsafe { GetCurrentProcess() })
}

/// The user of process `pid`, as a SID string.
pub fn sid_of_pid(pid: u32) -> io::Result<String> {
    // SAFETY: OpenProcess takes plain values; a null result is an error, reported below.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle just opened, owned here and closed on drop.
    let process = unsafe { OwnedHandle::from_raw_handle(handle) };
    sid_of_process(process.as_raw_handle())
}

fn sid_of_process(process: HANDLE) -> io::Result<String> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: `token` receives a handle on success, which is owned below.
    if unsafe { OpenProcessToken(process, TOKEN_QUERY, &mut token) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the token handle was just opened and is closed on drop.
    let token = unsafe { OwnedHandle::from_raw_handle(token) };
    // TOKEN_USER plus its SID: u64s keep the buffer aligned for the struct.
    let mut buf = [0u64; 64];
    let mut len = 0u32;
    // SAFETY: the buffer is writable for its size in bytes, which is what is passed.
    let ok = unsafe {
        GetTokenInformation(
            token.as_raw_handle(),
            TokenUser,
            buf.as_mut_ptr().cast(),
            std::mem::size_of_val(&buf) as u32,
            &mut len,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success the buffer starts with a TOKEN_USER, aligned (u64 buffer).
    let user = unsafe { &*buf.as_ptr().cast::<TOKEN_USER>() };
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: the SID points into `buf`, alive here; `text` receives a LocalAlloc'd string.
    if unsafe { ConvertSidToStringSidW(user.User.Sid, &mut text) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a NUL-terminated UTF-16 string from ConvertSidToStringSidW, read up to its NUL
    // and then freed with LocalFree as its documentation says.
    let sid = unsafe {
        let len = (0..).take_while(|&i| *text.add(i) != 0).count();
        let sid = String::from_utf16_lossy(std::slice::from_raw_parts(text, len));
        LocalFree(text.cast());
        sid
    };
    Ok(sid)
}

/// The pid of the server end of a connected pipe.
pub fn pipe_server_pid(pipe: &impl AsRawHandle) -> io::Result<u32> {
    let mut pid = 0u32;
    // SAFETY: the handle is a pipe for as long as `pipe` lives; `pid` receives the value.
    if unsafe { GetNamedPipeServerProcessId(pipe.as_raw_handle(), &mut pid) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// Refuses a pipe whose server is not this user's process: another user's program squatting
/// on the name would otherwise read every request.
pub fn check_server(pipe: &impl AsRawHandle) -> io::Result<()> {
    let pid = pipe_server_pid(pipe)?;
    let theirs = sid_of_pid(pid)?;
    let ours = user_sid()?;
    if theirs != ours {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("the pipe's server (pid {pid}) runs as {theirs}, not as this user ({ours})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipe_is_named_by_the_users_sid() {
        let sid = user_sid().expect("this process has a user");
        assert!(sid.starts_with("S-1-"), "{sid}");
        assert_eq!(
            pipe_name(&sid).to_string_lossy(),
            format!(r"\\.\pipe\cuba-exec-{sid}")
        );
        assert_eq!(sid_of_pid(std::process::id()).ok(), Some(sid));
    }
}
