//! A command on a pseudo console (`tty`): the console's output drained by a thread into the
//! output and the screen, input written by another, the exit waited for on the process
//! handle. At the exit the console is closed, which ends its output once what it held is read.

use std::sync::{mpsc, Arc, Mutex};

use cuba_protocol::{Stream, TtySize};
use windows_sys::Win32::Foundation::WAIT_OBJECT_0;
use windows_sys::Win32::System::Threading::{GetExitCodeProcess, WaitForSingleObject, INFINITE};

use super::plan::{Plan, STDIN_QUEUE};
use super::table::Rec;
use super::threads::{drain, ended, feed, thread};
use crate::platform::win_shell;
use crate::platform::windows::conpty::{Pty, PtyChild};
use crate::platform::windows::job::Job;
use crate::screen::Screen;

/// What closing a terminal's input is: Ctrl-Z then Enter, a console program's end of file.
pub const EOF: &[u8] = b"\x1a\r";

/// Starts `plan` in `job` on a pseudo console of `size`.
pub fn launch(rec: &Arc<Rec>, plan: &Plan, job: Arc<Job>, size: TtySize) -> std::io::Result<()> {
    crate::screen::valid_size(size).map_err(std::io::Error::other)?;
    let pty = Pty::open(size.cols, size.rows)?;
    let args = win_shell::args(plan.kind, &plan.req.command);
    let line = win_shell::command_line(plan.shell, &args);
    let child = pty.spawn(&line, Some(plan.cwd), Some(plan.env), &job)?;
    let output = pty.output.try_clone()?;
    let input = Arc::new(pty.input.try_clone()?);
    let pty = Arc::new(Mutex::new(pty));
    let (stdin_tx, stdin_rx) = mpsc::sync_channel(STDIN_QUEUE);
    {
        let mut data = rec.lock();
        data.info.pid = child.pid;
        data.job = Some(job);
        data.stdin = Some(stdin_tx.clone());
        data.pty = Some(pty.clone());
        data.screen = Some(Screen::new(size));
    }
    if let Some(data) = &plan.req.stdin {
        let _ = stdin_tx.try_send(Some(data.clone()));
    }
    if plan.req.close_stdin {
        let _ = stdin_tx.try_send(Some(EOF.to_vec()));
    }
    let (drained_tx, drained_rx) = mpsc::channel();
    let drained = rec.clone();
    thread("cubad-tty", move || {
        drain(&drained, Box::new(output), Stream::Stdout, &drained_tx)
    })?;
    thread("cubad-in", move || feed(&input, &stdin_rx))?;
    super::input::watch(rec.clone(), None);
    let waited = rec.clone();
    thread("cubad-wait", move || {
        let status = exit_code(&child);
        // The console holds its output pipe open until it is closed.
        pty.lock().unwrap_or_else(|e| e.into_inner()).close();
        ended(&waited, status, 1, &drained_rx);
    })?;
    Ok(())
}

/// Waits for `child` to end and reads its exit code (259 is one: read after the wait).
fn exit_code(child: &PtyChild) -> std::io::Result<Option<i32>> {
    use std::os::windows::io::AsRawHandle;
    let handle = child.process.as_raw_handle();
    // SAFETY: the process handle is open for as long as `child`.
    if unsafe { WaitForSingleObject(handle, INFINITE) } != WAIT_OBJECT_0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut code = 0u32;
    // SAFETY: as above; `code` receives the value.
    if unsafe { GetExitCodeProcess(handle, &mut code) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Some(code as i32))
}
