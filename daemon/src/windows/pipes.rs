//! A command on pipes: stdout and stderr each drained by a thread, stdin a named pipe the
//! daemon can ask about a waiting read (`input.rs`), the exit waited for by a thread.

use std::io::Read;
use std::os::windows::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;

use cuba_protocol::Stream;

use super::plan::{Plan, STDIN_QUEUE};
use super::table::Rec;
use super::threads::{drain, ended, feed, thread};
use crate::platform::win_shell::{self, Args};
use crate::platform::windows::job::Job;

/// No console window for the command (it still gets a console of its own, hidden: the target
/// of a Ctrl-Break).
const CREATE_NO_WINDOW: u32 = 0x0800_0000;

/// Starts `plan` in `job` with its stdio on pipes.
pub fn launch(rec: &Arc<Rec>, plan: &Plan, job: Arc<Job>) -> std::io::Result<()> {
    let Plan {
        shell,
        kind,
        req,
        cwd,
        env,
    } = *plan;
    // A named pipe the daemon can ask whether a read waits on it (`input.rs`).
    let (stdin_write, stdin_read) = crate::platform::windows::input::stdin_pipe()?;
    let mut cmd = Command::new(shell);
    match win_shell::args(kind, &req.command) {
        Args::Raw(raw) => cmd.raw_arg(raw),
        Args::Quoted(list) => cmd.args(list),
    };
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::from(stdin_read))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = job.spawn(&mut cmd, CREATE_NO_WINDOW)?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    drop(cmd);
    let (stdin_tx, stdin_rx) = mpsc::sync_channel(STDIN_QUEUE);
    {
        let mut data = rec.lock();
        data.info.pid = child.id();
        data.job = Some(job);
        data.stdin = Some(stdin_tx.clone());
    }
    let (drained_tx, drained_rx) = mpsc::channel();
    let mut readers = 0;
    for (pipe, stream) in [
        (
            stdout.map(|p| Box::new(p) as Box<dyn Read + Send>),
            Stream::Stdout,
        ),
        (
            stderr.map(|p| Box::new(p) as Box<dyn Read + Send>),
            Stream::Stderr,
        ),
    ] {
        if let Some(pipe) = pipe {
            let (rec, done) = (rec.clone(), drained_tx.clone());
            thread("cubad-out", move || drain(&rec, pipe, stream, &done))?;
            readers += 1;
        }
    }
    drop(drained_tx);
    if let Some(data) = &req.stdin {
        let _ = stdin_tx.try_send(Some(data.clone()));
    }
    if req.close_stdin {
        let _ = stdin_tx.try_send(None);
    }
    // The writer holds the only strong reference: its end closes when it ends (EOF), and the
    // watcher's look at the pipe never keeps it open.
    let stdin = Arc::new(std::fs::File::from(stdin_write));
    let pipe = Arc::downgrade(&stdin);
    thread("cubad-in", move || feed(&stdin, &stdin_rx))?;
    super::input::watch(rec.clone(), Some(pipe));
    let waited = rec.clone();
    thread("cubad-wait", move || {
        let status = child.wait().map(|s| s.code());
        ended(&waited, status, readers, &drained_rx);
    })?;
    Ok(())
}
