//! Stdio on pipes: stdin, stdout and stderr each a pipe the daemon holds the other end of;
//! stdout and stderr drained by the supervisor, stdin written by the stdin writer.

use std::os::fd::OwnedFd;

use tokio::net::unix::pipe;

use super::error::{LaunchError, Stage};
use super::stdin::{PipeSink, StdinSink};
use super::Connected;
use crate::platform;
use crate::platform::spawn::Spawn;
use crate::processes::supervise::{ChildIo, InputTarget, Source};

/// The daemon's ends of a child's three pipes.
pub struct Pipes {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

/// Makes the pipes: the child's ends go to `cmd`, the daemon's are returned.
pub fn before(cmd: &mut Spawn) -> Result<Pipes, LaunchError> {
    let made = (|| {
        let (in_r, in_w) = platform::pipe::pipe()?;
        let (out_r, out_w) = platform::pipe::pipe()?;
        let (err_r, err_w) = platform::pipe::pipe()?;
        cmd.stdio(in_r, out_w, err_w);
        Ok::<_, std::io::Error>(Pipes {
            stdin: in_w,
            stdout: out_r,
            stderr: err_r,
        })
    })();
    made.map_err(LaunchError::at(
        Stage::Pipes,
        "cannot make the child's pipes",
    ))
}

/// The daemon's ends of the child's pipes, ready for the runtime.
pub fn connect(pipes: Pipes, exit: ChildExit) -> Result<Connected, LaunchError> {
    let Pipes {
        stdin,
        stdout: out_fd,
        stderr: err_fd,
    } = pipes;
    let io_err = |e| LaunchError::at(Stage::Pipes, "cannot watch the child's pipes")(e);
    // Our own fresh pipe ends: made non-blocking in one call each, and handed to the runtime
    // without the checks an unknown descriptor needs.
    let watch = |fd: OwnedFd| {
        crate::base::fd::set_only_nonblocking(&fd)?;
        pipe::Receiver::from_owned_fd_unchecked(fd)
    };
    let io = ChildIo {
        stdout: Some(Source::Pipe(watch(out_fd).map_err(io_err)?)),
        stderr: Some(Source::Pipe(watch(err_fd).map_err(io_err)?)),
        exit,
        input: platform::pipe::id(&stdin).map(InputTarget::Pipe),
    };
    let sink = StdinSink::Pipe(PipeSink::new(stdin));
    Ok(Connected {
        io,
        sink,
        tty: None,
    })
}

pub type ChildExit = tokio::sync::oneshot::Receiver<crate::parts::reaper::Exit>;
