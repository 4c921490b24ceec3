//! Stdio on pipes: stdin, stdout and stderr each a pipe the daemon holds the other end of;
//! stdout and stderr drained by the supervisor, stdin written by the stdin writer.

use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};

use tokio::net::unix::pipe;

use super::stdin::StdinSink;
use super::Connected;
use crate::platform;
use crate::supervise::{ChildIo, InputTarget, Source};

/// Pipe buffer asked for, so a fast writer needs fewer wake-ups (capped by the kernel setting).
const PIPE_SIZE: i32 = 1024 * 1024;

pub fn before(cmd: &mut Command) {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
}

/// The daemon's ends of the child's pipes, ready for the runtime.
pub fn connect(child: &mut Child, exit: ChildExit) -> Result<Connected, String> {
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        return Err("child has no pipes".to_string());
    };
    let out_fd = OwnedFd::from(stdout);
    let err_fd = OwnedFd::from(stderr);
    platform::pipe::grow(&out_fd, PIPE_SIZE);
    platform::pipe::grow(&err_fd, PIPE_SIZE);
    let stdin = OwnedFd::from(stdin);
    let io_err = |e: std::io::Error| format!("cannot watch the child's pipes: {e}");
    let io = ChildIo {
        stdout: Some(Source::Pipe(
            pipe::Receiver::from_owned_fd(out_fd).map_err(io_err)?,
        )),
        stderr: Some(Source::Pipe(
            pipe::Receiver::from_owned_fd(err_fd).map_err(io_err)?,
        )),
        exit,
        input: platform::pipe::id(&stdin).map(InputTarget::Pipe),
    };
    let sink = StdinSink::Pipe(pipe::Sender::from_owned_fd(stdin).map_err(io_err)?);
    Ok(Connected {
        io,
        sink,
        tty: None,
    })
}

pub type ChildExit = tokio::sync::oneshot::Receiver<crate::reaper::Exit>;
