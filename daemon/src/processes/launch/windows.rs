//! Starting a process on Windows: the command line of its shell (`platform::win_shell`), its
//! environment as a Windows block, its Job Object (the tree's handle, as its cgroup is on
//! Linux), then its pipes — stdin a named pipe, whose pending read the supervisor looks for,
//! output read by threads (`threaded.rs`) — or its pseudo console. Its exit is waited for on
//! its process handle by a thread of its own and reaches the supervisor as the reaper's exit
//! does on Unix.

use std::os::windows::io::AsRawHandle;
use std::os::windows::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::error::{LaunchError, Stage};
use super::plan::{LaunchPlan, Program};
use super::stdin::{PipeSink, StdinSink};
use super::{Connected, Launcher, Started};
use crate::parts::terminal::{Master, Screen};
use crate::parts::tree::TreeRoot;
use crate::platform::win_shell::{self, Args, Kind};
use crate::platform::windows::conpty::Pty;
use crate::platform::windows::input::{StdinEnd, Waiting};
use crate::platform::windows::threaded::{thread, Reader, Writer};
use crate::platform::Exit;
use crate::processes::supervise::{ChildIo, InputTarget, Source};
use crate::state::record::TtyData;

/// No console window for the command (it still gets a console of its own, hidden: the target
/// of a Ctrl-Break).
const CREATE_NO_WINDOW: u32 = 0x0800_0000;

impl Launcher {
    /// Starts `plan`'s command in a job of its own, on pipes or a pseudo console.
    /// `_group`: never made here (budgets need Linux cgroups).
    pub(super) fn start(
        &self,
        plan: LaunchPlan,
        _group: Option<std::sync::Arc<super::AgentGroup>>,
    ) -> Result<Started, LaunchError> {
        super::plan::check_cwd(&plan.cwd)?;
        // The spawn handler refuses it first; nothing asked to run confined may run without.
        if plan.confinement.sandbox.active() {
            let why = format!(
                "a sandbox was asked for, and {}; the command was not run",
                crate::platform::windows::SANDBOX
            );
            return Err(LaunchError::new(Stage::Sandbox, why));
        }
        let text = match &plan.program {
            Program::Inline(text) | Program::Script(text) => text.clone(),
        };
        let kind = Kind::of(&plan.shell);
        let env = environment(&plan.env);
        let cgroup = self.cgroups.job().map_err(LaunchError::at(
            Stage::Cgroup,
            "cannot make the command's Job Object",
        ))?;
        let spawn_err = |e: std::io::Error| {
            let why = format!("cannot run {}: {e}", plan.shell);
            LaunchError::os(Stage::Spawn, why, e)
        };
        let (connected, pid) = match plan.terminal {
            Some(size) => {
                crate::parts::terminal::valid_size(size)
                    .map_err(|why| LaunchError::new(Stage::Terminal, why))?;
                let pty = Pty::open(size.cols, size.rows).map_err(LaunchError::at(
                    Stage::Terminal,
                    "cannot open a pseudo console",
                ))?;
                let line = win_shell::command_line(&plan.shell, &win_shell::args(kind, &text));
                let child = pty
                    .spawn(&line, Some(&plan.cwd), Some(&env), cgroup.job())
                    .map_err(spawn_err)?;
                let master = Arc::new(Master::of(pty).map_err(LaunchError::at(
                    Stage::Terminal,
                    "cannot read the pseudo console",
                ))?);
                let exit = waiter(child.process).map_err(spawn_err)?;
                let io = ChildIo {
                    stdout: Some(Source::Pty(master.clone())),
                    stderr: None,
                    exit,
                    input: None,
                };
                let tty = TtyData {
                    master: Some(master.clone()),
                    screen: Screen::new(size),
                };
                let connected = Connected {
                    io,
                    sink: StdinSink::Pty(master),
                    tty: Some(tty),
                };
                (connected, child.pid)
            }
            None => {
                let (stdin_write, stdin_read) = crate::platform::windows::input::stdin_pipe()
                    .map_err(LaunchError::at(Stage::Pipes, "cannot make the stdin pipe"))?;
                let mut cmd = Command::new(&plan.shell);
                match win_shell::args(kind, &text) {
                    Args::Raw(raw) => cmd.raw_arg(raw),
                    Args::Quoted(list) => cmd.args(list),
                };
                cmd.env_clear()
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .current_dir(&plan.cwd)
                    .stdin(Stdio::from(stdin_read))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let mut child = cgroup
                    .job()
                    .spawn(&mut cmd, CREATE_NO_WINDOW)
                    .map_err(spawn_err)?;
                drop(cmd);
                let pid = child.id();
                let pipes_err = LaunchError::at(Stage::Pipes, "cannot read the child's pipes");
                let stdout = match child.stdout.take() {
                    Some(p) => Some(Source::Pipe(
                        Reader::spawn("cubad-out", p).map_err(pipes_err)?,
                    )),
                    None => None,
                };
                let pipes_err = LaunchError::at(Stage::Pipes, "cannot read the child's pipes");
                let stderr = match child.stderr.take() {
                    Some(p) => Some(Source::Pipe(
                        Reader::spawn("cubad-err", p).map_err(pipes_err)?,
                    )),
                    None => None,
                };
                // The writer holds the stdin end; the supervisor's look for a pending read on it
                // (absent under Wine) never keeps it open.
                let stdin_end = StdinEnd::new(stdin_write);
                let input = Waiting::on(&stdin_end).map(InputTarget::PendingRead);
                let sink = Writer::spawn("cubad-in", stdin_end)
                    .map_err(LaunchError::at(Stage::Pipes, "cannot write the stdin pipe"))?;
                let process = std::os::windows::io::OwnedHandle::from(child);
                let exit = waiter(process).map_err(spawn_err)?;
                let io = ChildIo {
                    stdout,
                    stderr,
                    exit,
                    input,
                };
                let connected = Connected {
                    io,
                    sink: StdinSink::Pipe(PipeSink::new(sink)),
                    tty: None,
                };
                (connected, pid)
            }
        };
        let pid = i32::try_from(pid).unwrap_or(i32::MAX);
        Ok(Started {
            connected,
            root: TreeRoot {
                pid,
                start_time: crate::platform::proc::start_time_of(pid),
                marker: self.table.marker(plan.id),
            },
            cgroup: Some(cgroup),
            cleanup: Vec::new(),
        })
    }
}

/// The command's environment as Windows orders a block (names without case, sorted).
fn environment(env: &[(std::ffi::OsString, std::ffi::OsString)]) -> Vec<(String, String)> {
    let text: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    win_shell::merge_env(&text, &[])
}

/// Waits for `process` to end on a thread of its own: its exit code, as the supervisor awaits
/// it.
fn waiter(process: std::os::windows::io::OwnedHandle) -> std::io::Result<oneshot::Receiver<Exit>> {
    use windows_sys::Win32::Foundation::WAIT_OBJECT_0;
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, WaitForSingleObject, INFINITE,
    };
    let (tx, rx) = oneshot::channel();
    thread("cubad-wait", move || {
        let handle = process.as_raw_handle();
        // SAFETY: the handle is open for as long as `process`, owned by this thread.
        if unsafe { WaitForSingleObject(handle, INFINITE) } != WAIT_OBJECT_0 {
            tracing::warn!(
                "cannot wait for a process: {}",
                std::io::Error::last_os_error()
            );
            return;
        }
        let mut code = 0u32;
        // SAFETY: as above; `code` receives the value.
        if unsafe { GetExitCodeProcess(handle, &mut code) } == 0 {
            tracing::warn!(
                "cannot read an exit code: {}",
                std::io::Error::last_os_error()
            );
            return;
        }
        let _ = tx.send(Exit::Code(code as i32));
    })?;
    Ok(rx)
}
