//! A process's exit through its handle, which is signalled when it exits: opened with
//! `SYNCHRONIZE` and waited on (`WaitForSingleObject`) on a thread of its own, since Windows
//! has no readiness event for it that the async loop could await.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::time::Duration;

use windows_sys::Win32::Foundation::{WAIT_OBJECT_0, WAIT_TIMEOUT};
use windows_sys::Win32::System::Threading::{
    OpenProcess, WaitForSingleObject, INFINITE, PROCESS_SYNCHRONIZE,
};

/// `OpenProcess`'s error for a pid no process has.
const ERROR_INVALID_PARAMETER: i32 = 87;

/// `Some(true)`: `pid` exited (or is gone), `Some(false)`: still there after `limit`, `None`:
/// its handle cannot be opened (another user's process): the caller looks at it again and again.
pub async fn wait(pid: i32, limit: Duration) -> io::Result<Option<bool>> {
    let Ok(id) = u32::try_from(pid) else {
        return Ok(Some(true));
    };
    // SAFETY: plain values; a null result is an error, read right after.
    let handle = unsafe { OpenProcess(PROCESS_SYNCHRONIZE, 0, id) };
    if handle.is_null() {
        let err = io::Error::last_os_error();
        return Ok(match err.raw_os_error() {
            Some(ERROR_INVALID_PARAMETER) => Some(true),
            _ => None,
        });
    }
    // SAFETY: a handle just opened, owned here and closed on drop.
    let process = unsafe { OwnedHandle::from_raw_handle(handle) };
    // INFINITE is no limit at all: stay below it.
    let ms = u32::try_from(limit.as_millis()).map_or(INFINITE - 1, |ms| ms.min(INFINITE - 1));
    let (tx, rx) = tokio::sync::oneshot::channel();
    // A plain thread, not the blocking pool: one left waiting does not hold up cubactl's exit.
    std::thread::Builder::new()
        .name("exit-wait".into())
        .spawn(move || {
            // SAFETY: the handle is open (owned by this closure) for the whole wait.
            let r = unsafe { WaitForSingleObject(process.as_raw_handle(), ms) };
            let result = match r {
                WAIT_OBJECT_0 => Ok(true),
                WAIT_TIMEOUT => Ok(false),
                _ => Err(io::Error::last_os_error()),
            };
            let _ = tx.send(result);
        })?;
    let waited = rx
        .await
        .map_err(|_| io::Error::other("the exit-wait thread ended without an answer"))?;
    waited.map(Some)
}
