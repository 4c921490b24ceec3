//! Stdio on a terminal: a new pseudo-terminal whose other end is the child's stdin, stdout and
//! stderr, and its controlling terminal in a session of its own (job control, Ctrl-C through
//! the line discipline, SIGWINCH, SIGHUP when the terminal goes).

use std::os::fd::OwnedFd;
use std::sync::Arc;

use cuba_protocol::TtySize;

use super::error::{LaunchError, Stage};
use super::pipes::ChildExit;
use super::stdin::StdinSink;
use super::Connected;
use crate::parts::reaper::Reaper;
use crate::parts::terminal::{self, Master, Screen};
use crate::platform::spawn::{Group, Spawn};
use crate::processes::supervise::{ChildIo, InputTarget, Source};
use crate::state::record::TtyData;

pub struct Terminal {
    master: Arc<Master>,
    /// The child's end; the daemon drops its copy once the child has its own, so the master
    /// reads end-of-file when the child's tree closes it.
    slave: OwnedFd,
    size: TtySize,
}

impl Terminal {
    /// A new terminal of `size`. Opened while no child can be spawned: the master end is not
    /// close-on-exec from its first moment, and no other child may inherit it.
    pub fn open(reaper: &Reaper, size: TtySize) -> Result<Terminal, LaunchError> {
        let (master, slave) =
            reaper
                .exclusive(|| terminal::open(size))
                .map_err(LaunchError::at(
                    Stage::Terminal,
                    "cannot open a pseudo-terminal",
                ))?;
        Ok(Terminal {
            master: Arc::new(master),
            slave,
            size,
        })
    }

    pub fn before(&self, cmd: &mut Spawn) -> Result<(), LaunchError> {
        let dup = |fd: &OwnedFd| {
            fd.try_clone().map_err(LaunchError::at(
                Stage::Terminal,
                "cannot open a pseudo-terminal",
            ))
        };
        cmd.stdio(dup(&self.slave)?, dup(&self.slave)?, dup(&self.slave)?);
        // setsid also makes it a process group leader: the group is the tree's handle.
        cmd.group(Group::Session).hook(Box::new(
            crate::platform::terminal::take_controlling_terminal,
        ));
        Ok(())
    }

    /// The master end for the supervisor (reads), the stdin writer (writes) and the record
    /// (resizes, the screen).
    pub fn connect(self, exit: ChildExit) -> Connected {
        drop(self.slave);
        let io = ChildIo {
            stdout: Some(Source::Pty(self.master.clone())),
            stderr: None,
            exit,
            input: Some(InputTarget::Tty(self.master.clone())),
        };
        Connected {
            io,
            sink: StdinSink::Pty(self.master.clone()),
            tty: Some(TtyData {
                master: Some(self.master),
                screen: Screen::new(self.size),
            }),
        }
    }
}
