//! Windows: who a user is (their SID), the daemon's pipe name, and the check that a pipe's far
//! end is a process of this user — what the socket's peer-uid check is on Unix.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::PathBuf;

use tokio::net::windows::named_pipe::{NamedPipeServer, ServerOptions};
use windows_sys::Win32::Foundation::{LocalFree, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
};
use windows_sys::Win32::Security::{
    GetTokenInformation, TokenUser, SECURITY_ATTRIBUTES, TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::System::Pipes::{GetNamedPipeClientProcessId, GetNamedPipeServerProcessId};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, OpenProcess, OpenProcessToken, PROCESS_QUERY_LIMITED_INFORMATION,
};

mod procs;

pub use procs::{processes, Process};

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
    // SAFETY: the SID points into `buf`, alive for the call.
    unsafe { sid_text(user.User.Sid) }
}

/// A SID as text (`S-1-5-…`).
///
/// # Safety
/// `sid` points to a valid SID for the call.
unsafe fn sid_text(sid: *mut std::ffi::c_void) -> io::Result<String> {
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: the caller's SID; `text` receives a LocalAlloc'd string.
    if unsafe { ConvertSidToStringSidW(sid, &mut text) } == 0 {
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

/// SIDs that may have access to a private directory besides its user: the system itself and
/// the machine's administrators, who can take any file anyway.
const TRUSTED: [&str; 2] = ["S-1-5-18", "S-1-5-32-544"];

/// Why directory `path` is not this user's alone, or `None` when it is: its owner must be this
/// user, and its DACL must allow nobody else (but [`TRUSTED`]). A missing DACL allows
/// everyone. Inherit-only entries (which apply to what is made inside, not to it) count too:
/// what is made inside must be as private.
pub fn private_dir_problem(path: &std::path::Path) -> io::Result<Option<String>> {
    use windows_sys::Win32::Security::Authorization::{GetNamedSecurityInfoW, SE_FILE_OBJECT};
    use windows_sys::Win32::Security::{DACL_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION};
    let name = wide(path);
    let mut descriptor: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name; the descriptor is freed by `Descriptor`'s drop.
    let rc = unsafe {
        GetNamedSecurityInfoW(
            name.as_ptr(),
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut descriptor,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    Descriptor(descriptor).problem(&user_sid()?)
}

/// Makes this process's standard handles non-inheritable. A child started with handle
/// inheritance (every `std::process::Command`) otherwise gets a copy of each, whatever its own
/// stdio is: a daemon started by an editor's MCP server would hold the editor's pipe open for
/// as long as it runs, and the editor would never see the server's end. std's `Stdio::inherit`
/// makes an inheritable copy of its own, so children given this process's stdio still get it.
pub fn no_inherited_stdio() {
    use windows_sys::Win32::Foundation::{SetHandleInformation, HANDLE_FLAG_INHERIT};
    use windows_sys::Win32::System::Console::{
        GetStdHandle, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
    };
    for which in [STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE] {
        // SAFETY: GetStdHandle returns this process's handle (or null / invalid, which
        // SetHandleInformation refuses harmlessly).
        unsafe {
            let handle = GetStdHandle(which);
            if !handle.is_null() {
                SetHandleInformation(handle, HANDLE_FLAG_INHERIT, 0);
            }
        }
    }
}

/// The Wine version this program runs under, or `None` on Windows itself (Wine's `ntdll`
/// exports `wine_get_version`; Windows' does not).
pub fn wine() -> Option<String> {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
    let ntdll: Vec<u16> = "ntdll.dll".encode_utf16().chain(Some(0)).collect();
    // SAFETY: a NUL-terminated module name; ntdll is loaded in every process.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    if module.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated symbol name in a loaded module.
    let f = unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }?;
    // SAFETY: Wine's `const char *wine_get_version(void)`: a static NUL-terminated string.
    let version = unsafe {
        let get: unsafe extern "C" fn() -> *const std::ffi::c_char = std::mem::transmute(f);
        std::ffi::CStr::from_ptr(get())
    };
    Some(version.to_string_lossy().into_owned())
}

/// A security descriptor the system allocated, freed on drop.
struct Descriptor(*mut std::ffi::c_void);

impl Drop for Descriptor {
    fn drop(&mut self) {
        // SAFETY: allocated with LocalAlloc by the call that made it; freed once.
        unsafe { LocalFree(self.0) };
    }
}

impl Descriptor {
    /// From SDDL text.
    fn from_sddl(sddl: &str) -> io::Result<Descriptor> {
        let text: Vec<u16> = sddl.encode_utf16().chain(Some(0)).collect();
        let mut descriptor: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: a NUL-terminated string; the descriptor is owned by the result.
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                text.as_ptr(),
                SDDL_REVISION_1,
                &mut descriptor,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Descriptor(descriptor))
    }

    fn dacl(&self) -> io::Result<*mut windows_sys::Win32::Security::ACL> {
        use windows_sys::Win32::Security::GetSecurityDescriptorDacl;
        let (mut present, mut dacl, mut defaulted) = (0, std::ptr::null_mut(), 0);
        // SAFETY: a valid descriptor; the DACL points into it.
        if unsafe { GetSecurityDescriptorDacl(self.0, &mut present, &mut dacl, &mut defaulted) }
            == 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(if present == 0 {
            std::ptr::null_mut()
        } else {
            dacl
        })
    }

    /// Why this descriptor does not keep a directory to user `me` (see
    /// [`private_dir_problem`]).
    fn problem(&self, me: &str) -> io::Result<Option<String>> {
        use windows_sys::Win32::Security::{
            GetAce, GetSecurityDescriptorOwner, ACCESS_ALLOWED_ACE, ACE_HEADER,
        };
        const ACCESS_ALLOWED_ACE_TYPE: u8 = 0;
        let (mut owner, mut defaulted) = (std::ptr::null_mut(), 0);
        // SAFETY: a valid descriptor; the owner points into it.
        if unsafe { GetSecurityDescriptorOwner(self.0, &mut owner, &mut defaulted) } == 0 {
            return Err(io::Error::last_os_error());
        }
        if owner.is_null() {
            return Ok(Some("without an owner".into()));
        }
        // SAFETY: the owner SID, inside the descriptor `self` keeps alive.
        let owner = unsafe { sid_text(owner)? };
        if owner != me {
            return Ok(Some(format!("owned by {owner}, not by this user ({me})")));
        }
        let dacl = self.dacl()?;
        if dacl.is_null() {
            return Ok(Some("open to everyone (it has no access list)".into()));
        }
        // SAFETY: the DACL, inside the descriptor `self` keeps alive.
        let count = unsafe { (*dacl).AceCount };
        for i in 0..u32::from(count) {
            let mut ace: *mut std::ffi::c_void = std::ptr::null_mut();
            // SAFETY: an index below the DACL's count; `ace` points into the DACL.
            if unsafe { GetAce(dacl, i, &mut ace) } == 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: every ACE starts with its header.
            let header = unsafe { &*ace.cast::<ACE_HEADER>() };
            if header.AceType != ACCESS_ALLOWED_ACE_TYPE {
                continue;
            }
            let allowed = ace.cast::<ACCESS_ALLOWED_ACE>();
            // SAFETY: an access-allowed ACE's SID starts at its SidStart field.
            let who = unsafe { sid_text((&raw mut (*allowed).SidStart).cast())? };
            if who != me && !TRUSTED.contains(&who.as_str()) {
                return Ok(Some(format!("open to {who}")));
            }
        }
        Ok(None)
    }
}

fn wide(path: &std::path::Path) -> Vec<u16> {
    use std::os::windows::ffi::OsStrExt;
    path.as_os_str().encode_wide().chain(Some(0)).collect()
}

/// Makes directory `path` (and its missing parents) and gives it a protected DACL of this user
/// alone (the trusted SIDs kept), so it does not inherit a wider one from where it is made.
pub fn make_private_dir(path: &std::path::Path) -> io::Result<()> {
    use windows_sys::Win32::Security::Authorization::{SetNamedSecurityInfoW, SE_FILE_OBJECT};
    use windows_sys::Win32::Security::{
        DACL_SECURITY_INFORMATION, PROTECTED_DACL_SECURITY_INFORMATION,
    };
    std::fs::create_dir_all(path)?;
    // Full control, inherited by what is made inside, for the user, SYSTEM and administrators.
    let descriptor = Descriptor::from_sddl(&private_sddl(&user_sid()?))?;
    let dacl = descriptor.dacl()?;
    // SAFETY: a NUL-terminated name; the DACL lives in `descriptor` for the call.
    let rc = unsafe {
        SetNamedSecurityInfoW(
            wide(path).as_ptr(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            dacl,
            std::ptr::null_mut(),
        )
    };
    match rc {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(code as i32)),
    }
}

/// A private directory's DACL: protected, the user, SYSTEM and administrators, inherited.
fn private_sddl(sid: &str) -> String {
    format!("D:P(A;OICI;FA;;;{sid})(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)")
}

/// Opens the daemon's pipe `name`, waiting up to 5 s while every instance is busy (the server
/// makes the next one as soon as it accepts), and refuses a server that is not this user's.
pub async fn open_pipe(
    name: &std::path::Path,
) -> io::Result<tokio::net::windows::named_pipe::NamedPipeClient> {
    use std::time::{Duration, Instant};
    use tokio::net::windows::named_pipe::ClientOptions;
    const ERROR_PIPE_BUSY: i32 = 231;
    let deadline = Instant::now() + Duration::from_secs(5);
    let pipe = loop {
        match ClientOptions::new().open(name) {
            Ok(pipe) => break pipe,
            // Windows offers no wait for a free instance that a task can await; the instance
            // comes within microseconds of the previous accept.
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => return Err(e),
        }
    };
    check_server(&pipe)?;
    Ok(pipe)
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

/// The pipe's security descriptor, in SDDL: a protected DACL (nothing inherited) that allows
/// everything to `sid` and nothing to anyone else; the owner is the creator.
pub fn pipe_sddl(sid: &str) -> String {
    format!("D:P(A;;GA;;;{sid})")
}

/// One instance of the daemon's pipe, open to this user only, refusing clients from other
/// machines. `first`: it must be the name's first instance, so a second daemon of the same
/// user fails here (`ERROR_ACCESS_DENIED`). Wine 8 does not enforce that flag, so the daemon
/// holds a lock file as well, as it does on Unix.
pub fn pipe_server(name: &std::path::Path, first: bool) -> io::Result<NamedPipeServer> {
    let sddl: Vec<u16> = pipe_sddl(&user_sid()?)
        .encode_utf16()
        .chain(Some(0))
        .collect();
    let mut descriptor: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: a NUL-terminated UTF-16 string; `descriptor` receives a LocalAlloc'd descriptor,
    // freed below.
    let ok = unsafe {
        ConvertStringSecurityDescriptorToSecurityDescriptorW(
            sddl.as_ptr(),
            SDDL_REVISION_1,
            &mut descriptor,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    let mut attributes = SECURITY_ATTRIBUTES {
        nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: descriptor,
        bInheritHandle: 0,
    };
    // SAFETY: the attributes and the descriptor they point to live until the call returns;
    // the pipe keeps its own copy.
    let server = unsafe {
        ServerOptions::new()
            .first_pipe_instance(first)
            .reject_remote_clients(true)
            .create_with_security_attributes_raw(
                name,
                (&mut attributes as *mut SECURITY_ATTRIBUTES).cast(),
            )
    };
    // SAFETY: allocated by the conversion above, not used after this.
    unsafe { LocalFree(descriptor) };
    server
}

/// The pid of the client end of a connected pipe.
pub fn pipe_client_pid(pipe: &impl AsRawHandle) -> io::Result<u32> {
    let mut pid = 0u32;
    // SAFETY: the handle is a pipe for as long as `pipe` lives; `pid` receives the value.
    if unsafe { GetNamedPipeClientProcessId(pipe.as_raw_handle(), &mut pid) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// Refuses a client that is not this user's process (the descriptor already keeps others
/// out; this is the daemon's own check, as the peer-uid check is on Unix). Its pid when it is.
pub fn check_client(pipe: &impl AsRawHandle) -> io::Result<u32> {
    let pid = pipe_client_pid(pipe)?;
    let theirs = sid_of_pid(pid)?;
    let ours = user_sid()?;
    if theirs != ours {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("pipe client pid {pid} runs as {theirs}, not as this user ({ours})"),
        ));
    }
    Ok(pid)
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
        assert_eq!(sid_of_pid(std::process::id()).ok(), Some(sid.clone()));
        assert_eq!(pipe_sddl(&sid), format!("D:P(A;;GA;;;{sid})"));
    }

    #[test]
    fn the_snapshot_has_this_process_and_its_program() {
        let me = std::process::id();
        let all = processes();
        let mine = all.iter().find(|p| p.pid == me).expect("this process");
        assert!(mine.exe.to_ascii_lowercase().ends_with(".exe"), "{mine:?}");
        assert!(mine.ppid != me, "{mine:?}");
    }

    #[test]
    fn only_a_descriptor_of_this_user_alone_is_private() {
        let me = user_sid().expect("sid");
        let verdict = |sddl: String| {
            Descriptor::from_sddl(&sddl)
                .expect("sddl")
                .problem(&me)
                .expect("read")
        };
        assert_eq!(verdict(format!("O:{me}{}", private_sddl(&me))), None);
        assert_eq!(
            verdict(format!("O:{me}D:P(A;;FA;;;{me})(A;;FA;;;WD)")),
            Some("open to S-1-1-0".into())
        );
        assert_eq!(
            verdict(format!("O:BAD:P(A;;FA;;;{me})")),
            Some(format!("owned by S-1-5-32-544, not by this user ({me})"))
        );
        assert!(verdict(format!("O:{me}")).is_some_and(|w| w.contains("no access list")));
        // A denying entry for someone else narrows, it does not open.
        assert_eq!(
            verdict(format!("O:{me}D:P(D;;FA;;;WD)(A;;FA;;;{me})")),
            None
        );
    }

    #[test]
    #[ignore = "Wine 8 keeps no access list on a file (it reads back as Everyone); run on Windows"]
    fn a_directory_made_private_is_found_private() {
        let top = tempfile::tempdir().expect("temp");
        let dir = top.path().join("state");
        make_private_dir(&dir).expect("made");
        assert_eq!(private_dir_problem(&dir).expect("read"), None);
        assert!(private_dir_problem(&top.path().join("missing")).is_err());
    }

    #[tokio::test]
    async fn a_user_only_pipe_carries_bytes_and_both_ends_check_the_user() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let name = pipe_name(&format!("test-{}", std::process::id()));
        let server = pipe_server(&name, true).expect("first instance");
        let mut client = crate::client::transport::connect(&name)
            .await
            .expect("connect");
        server.connect().await.expect("accept");
        assert_eq!(check_client(&server).ok(), Some(std::process::id()));
        let mut server = server;
        client.write_all(b"ping").await.expect("write");
        let mut got = [0u8; 4];
        server.read_exact(&mut got).await.expect("read");
        assert_eq!(&got, b"ping");
    }
}
