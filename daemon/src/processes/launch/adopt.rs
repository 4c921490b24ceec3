//! Taking over a process another program of this daemon started (an in-place upgrade): its
//! record gets its handles again, and a new supervisor and stdin writer carry on where the
//! paused ones stopped, on the same descriptors.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::ProcessInfo;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use super::error::{LaunchError, Stage};
use super::stdin::{self, PipeSink, StdinSink};
use super::{Launcher, CONTROL_QUEUE};
use crate::parts::terminal::{Master, Screen};
use crate::parts::tree::TreeRoot;
use crate::platform;
use crate::platform::Exit;
use crate::processes::supervise::{supervise, ChildIo, Cleanup, InputTarget, Job, Route, Source};
use crate::state::record::{Control, Outcome, StdinMsg, StopCause, TtyData, Writer};

/// A handed-over process: its row, tree, descriptors and what is left of its timers.
pub struct Adopted {
    pub info: ProcessInfo,
    pub root: TreeRoot,
    pub stop: Option<StopCause>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
    /// The master, the device path, the escape codes that rebuild its screen.
    pub terminal: Option<(OwnedFd, String, Vec<u8>)>,
    /// The stdin pipe (`None` on a terminal), bytes not written yet, close asked for.
    pub stdin: Option<(Option<OwnedFd>, Vec<u8>, bool)>,
    pub timeout: Option<Duration>,
    pub kill_in: Option<Duration>,
    /// A session's shell: its name, nonce, command pipe and confinement.
    pub session: Option<(String, String, OwnedFd, super::Confinement)>,
    /// Its client's policy, for connections from inside its tree.
    pub policy: Option<Arc<crate::base::policy::Effective>>,
    /// Its pooled v2 cgroup.
    pub cgroup: Option<crate::platform::cgroup::CgroupSlot>,
    /// The listener of its tree's exec checks.
    pub exec_listener: Option<OwnedFd>,
    /// Its tree's Unix socket rule, with the sockets the tree made.
    pub sockets: Option<Arc<crate::parts::unix_sockets::Sockets>>,
    /// The agent whose budget holds its tree, and that budget.
    pub budget: Option<(String, cuba_protocol::Budget)>,
}

impl Launcher {
    /// Gives the record `p` (already in the table, its row and output restored) its handles
    /// and starts its supervisor and stdin writer, which writes the record from then on.
    /// `exit` comes from the reaper, which had the pid registered before it reaped anything.
    /// A process that cannot be taken over has its tree killed and ends `lost`.
    pub fn adopt(
        &self,
        p: Writer,
        a: Adopted,
        exit: oneshot::Receiver<Exit>,
        route: Option<Box<dyn Route>>,
    ) -> Result<(), LaunchError> {
        let root = a.root.clone();
        match self.handles(&p, a, exit, route) {
            Ok((job, io, control)) => {
                tokio::spawn(supervise(job, p, io, control));
                Ok(())
            }
            Err(e) => {
                crate::parts::tree::kill_tree(&root, &crate::parts::tree::Find::Scan);
                p.lock().set_drained();
                let why = format!("not taken over by the upgrade: {e}");
                self.table.finish(&p, Outcome::lost(why));
                Err(e)
            }
        }
    }

    /// What the supervisor of taken-over `p` needs, its record filled in.
    fn handles(
        &self,
        p: &Writer,
        a: Adopted,
        exit: oneshot::Receiver<Exit>,
        route: Option<Box<dyn Route>>,
    ) -> Result<(Job, ChildIo, mpsc::Receiver<Control>), LaunchError> {
        let id = p.id;
        let at = |stage| {
            move |e: std::io::Error| LaunchError::os(stage, format!("process {id}: {e}"), e)
        };
        let master = match a.terminal {
            Some((fd, path, screen)) => Some((
                Arc::new(Master::adopt(fd, path).map_err(at(Stage::Terminal))?),
                screen,
            )),
            None => None,
        };
        let pipe_in = |fd: Option<OwnedFd>| -> Result<Option<Source>, LaunchError> {
            fd.map(|fd| {
                pipe::Receiver::from_owned_fd(fd)
                    .map(Source::Pipe)
                    .map_err(at(Stage::Pipes))
            })
            .transpose()
        };
        let (stdout, input) = match &master {
            Some((m, _)) => (
                Some(Source::Pty(m.clone())),
                Some(InputTarget::Tty(m.clone())),
            ),
            None => {
                let input = a
                    .stdin
                    .as_ref()
                    .and_then(|(fd, _, _)| fd.as_ref())
                    .and_then(platform::pipe::id)
                    .map(InputTarget::Pipe);
                (pipe_in(a.stdout)?, input)
            }
        };
        let io = ChildIo {
            stdout,
            stderr: pipe_in(a.stderr)?,
            exit,
            input,
        };
        let (control_tx, control_rx) = mpsc::channel(CONTROL_QUEUE);
        let mut writer = None;
        if let Some((fd, pending, eof)) = a.stdin {
            let sink = match (&master, fd) {
                (Some((m, _)), _) => StdinSink::Pty(m.clone()),
                (None, Some(fd)) => StdinSink::Pipe(PipeSink::new(fd)),
                (None, None) => {
                    let why = format!("process {id}: no stdin to write to");
                    return Err(LaunchError::new(Stage::Pipes, why));
                }
            };
            let (tx, rx) = mpsc::channel(stdin::QUEUE);
            // The queue is empty: these cannot fail for lack of room.
            if !pending.is_empty() {
                let _ = tx.try_send(StdinMsg::Data(pending));
            }
            if eof {
                let _ = tx.try_send(StdinMsg::Eof);
            }
            writer = Some((sink, rx, tx));
        }
        // The agent's cgroups are made again (the same directories) with the budget it had.
        let group = (a.budget.as_ref()).and_then(|(name, b)| {
            let made = self.cgroups.group(name, *b);
            made.map_err(|e| tracing::warn!(id, "agent {name}: {e}"))
                .ok()
        });
        let cgroup = self.cgroups.existing(p.id, a.cgroup, group);
        {
            let mut rec = p.lock();
            rec.root = Some(a.root);
            rec.cgroup = cgroup.clone();
            rec.stop = a.stop;
            rec.policy = a.policy.clone();
            // Before the listener is taken over: its judge is made from it.
            rec.sockets = a.sockets.clone();
            rec.control = Some(control_tx);
            rec.stdin = writer.as_ref().map(|(_, _, tx)| tx.clone());
            if let (Some((m, screen)), Some(size)) = (&master, a.info.tty) {
                let mut rebuilt = Screen::new(size);
                rebuilt.feed(screen);
                rec.tty = Some(TtyData {
                    master: Some(m.clone()),
                    screen: rebuilt,
                });
            }
        }
        if let Some(listener) = a.exec_listener {
            self.adopt_exec_listener(p.proc(), listener);
        }
        if let Some((sink, rx, _)) = writer {
            // Handed over running: its terminal was read long ago.
            tokio::spawn(stdin::write_stdin(sink, rx, None));
        }
        let job = Job {
            table: self.table.clone(),
            grace: self.grace,
            timeout: a.timeout,
            route,
            cleanup: self.cleanup_of(p.id, cgroup),
            kill_in: a.kill_in,
            // The client's pid is not checked against a connection any more: not watched.
            orphan: None,
            // Its clocks are not carried over an upgrade: none runs again.
            leftover: None,
        };
        Ok((job, io, control_rx))
    }

    /// Answers the execs of a process taken over at an upgrade. Where this program does not
    /// check execs, the listener is closed: every later exec in that tree fails (ENOSYS)
    /// rather than going on unchecked or waiting for an answer forever.
    fn adopt_exec_listener(
        &self,
        p: &Arc<crate::state::record::Proc>,
        listener: std::os::fd::OwnedFd,
    ) {
        match &*self.exec {
            #[cfg(target_os = "linux")]
            super::ExecChecking::Active(service, _) => {
                service.adopt((&self.table, &self.asks), p, listener)
            }
            _ => {
                tracing::warn!(
                    id = p.id,
                    "exec checks are {} here: the execs of this handed-over process will fail",
                    self.exec.describe()
                );
                drop(listener);
            }
        }
    }

    /// What the layers of a command's launch leave to undo, made again for a process this
    /// program did not start: its script file and its cgroups.
    fn cleanup_of(
        &self,
        id: u64,
        cgroup: Option<Arc<crate::platform::cgroup::ProcCgroup>>,
    ) -> Vec<Cleanup> {
        let script = self.table.state_dir().script(id);
        let mut cleanup = vec![super::program::remove_script(script)];
        if let Some(cg) = cgroup {
            cleanup.push(Box::new(move || {
                crate::base::blocking::off_runtime(move || cg.remove())
            }));
        }
        cleanup
    }
}
