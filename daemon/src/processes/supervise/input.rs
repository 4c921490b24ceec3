//! Waiting for input, read from the kernel's state rather than guessed from prompts: when the
//! output has been quiet for [`QUIET`] (since the last output, a stdin write, or the start), the
//! tree is checked for a member blocked reading the stdin pipe the daemon holds, or (on a
//! terminal) a member of the foreground group blocked reading the terminal. Input and resizes
//! clear the state again.

use std::time::Duration;

use cuba_protocol::TtySize;
use tokio::time::Instant;

use super::Supervisor;
#[cfg(unix)]
use crate::parts::terminal::Master;
#[cfg(unix)]
use crate::parts::tree::{Find, TreeRoot};
#[cfg(unix)]
use crate::platform::cgroup::ProcCgroup;
#[cfg(unix)]
use crate::platform::input::{self, Source};
#[cfg(unix)]
use crate::platform::proc;
use crate::state::record::Writer;
#[cfg(unix)]
use crate::state::table::Table;

/// How long output must have been quiet before the tree is checked.
pub const QUIET: Duration = Duration::from_millis(150);
/// A check that finds nobody reading is repeated after doubling pauses (the process may reach
/// its `read` a little later), this many times, then not again until the next output or stdin
/// write: an idle process costs nothing.
const CHECKS: u32 = 5;

/// What a process waiting for input would be blocked reading.
pub enum InputTarget {
    /// The stdin pipe the daemon holds the write end of, by inode (both ends share it).
    #[cfg(unix)]
    Pipe(u64),
    /// The terminal: its foreground group reading it.
    #[cfg(unix)]
    Tty(std::sync::Arc<Master>),
    /// On Windows the stdin pipe, looked at for a pending read in a tree that used no CPU.
    #[cfg(windows)]
    PendingRead(crate::platform::windows::input::Waiting),
}

impl Supervisor<'_> {
    /// Output or a stdin write: the quiet period starts again.
    pub(super) fn rearm_input_check(&mut self) {
        self.disarm_orphan();
        if self.input.is_some() && !self.exited {
            self.checks = 0;
            self.input_check_at = Some(Instant::now() + QUIET);
        }
    }

    /// Calls `write` with the writer of the record input concerns: this one (`id` is its own),
    /// or in a session the command running now (that is `id`, when one is named).
    pub(super) fn write_target<R>(
        &self,
        id: Option<u64>,
        write: impl FnOnce(&Writer) -> R,
    ) -> Option<R> {
        if id == Some(self.p.id) || (id.is_none() && self.route.is_none()) {
            return Some(write(self.p));
        }
        let route = self.route.as_ref()?;
        let (mut write, mut out) = (Some(write), None);
        route.write_current(&mut |cmd| {
            if id.is_none_or(|id| cmd.id == id) {
                out = write.take().map(|w| w(cmd));
            }
        });
        out
    }

    /// Bytes were queued for the stdin of `id` (`eof`: and it was closed).
    pub(super) fn input_sent(&mut self, id: u64, eof: bool) {
        let was_waiting = self.write_target(Some(id), |target| {
            let was = {
                let mut rec = target.lock();
                if eof {
                    rec.stdin = None;
                }
                rec.moved_on()
            };
            if was {
                target.notify();
            }
            was
        });
        if was_waiting == Some(true) {
            self.table.changed();
        }
        self.rearm_input_check();
    }

    /// A new terminal size: the terminal, its screen and the row; a full-screen program
    /// redraws, so it is no longer waiting either.
    pub(super) fn resize(&mut self, size: TtySize) -> std::io::Result<()> {
        let was_waiting = {
            let mut rec = self.p.lock();
            let Some(tty) = rec.tty.as_mut() else {
                return Err(std::io::Error::other("the process has no terminal"));
            };
            let Some(master) = tty.master.as_ref() else {
                return Err(std::io::Error::other("the process has ended"));
            };
            master.resize(size)?;
            tty.screen.resize(size);
            rec.set_tty_size(size);
            rec.moved_on()
        };
        if was_waiting {
            self.p.notify();
            self.table.changed();
        }
        self.rearm_input_check();
        Ok(())
    }

    /// Output has been quiet: is a process of the tree blocked reading the stdin pipe we hold,
    /// or (on a terminal) a process of the foreground group blocked reading the terminal?
    pub(super) fn check_input(&mut self) {
        if self.input.is_none() {
            return;
        }
        // In a session, the command running is what waits (the shell waiting for the next
        // command between them is not news).
        let target = match &self.route {
            Some(route) => match route.current() {
                Some(cmd) => cmd,
                None => return,
            },
            None => self.p.proc().clone(),
        };
        // Nobody can answer once stdin is closed; one already reported has nothing new.
        if !target.lock().can_wait_for_input() {
            return;
        }
        match self.member_reading() {
            // What it wrote before its read (the prompt) is taken in first: the output was not
            // quiet after all (and the check starts over). A busy runtime can take this timer
            // before the read that is due.
            Some(_) if self.take_unread() > 0 => {}
            Some(pid) => {
                let changed = self.write_target(Some(target.id), |w| {
                    let mut rec = w.lock();
                    let now = rec.can_wait_for_input() && rec.last_output.elapsed() >= QUIET;
                    if now {
                        rec.waiting_input(true);
                    }
                    now
                });
                if changed == Some(true) {
                    tracing::debug!(id = target.id, pid, "waiting for input");
                    self.report_waiting(&target);
                    self.arm_orphan();
                    target.notify();
                    self.table.changed();
                } else {
                    self.rearm_input_check();
                }
            }
            None if self.checks + 1 < CHECKS => {
                self.checks += 1;
                self.input_check_at = Some(Instant::now() + QUIET * (1 << self.checks));
            }
            None => {}
        }
    }

    /// Reads what waits in the pipes or the terminal now: the bytes taken. A terminal must be
    /// read, not asked (`FIONREAD`): what the program wrote reaches the master through the
    /// kernel's deferred terminal work, which only a read waits for — a prompt written just
    /// before the program's `read` can be counted nowhere yet under load.
    fn take_unread(&mut self) -> usize {
        let mut buf = [0u8; 4096];
        self.drain_now(&mut buf)
    }

    /// A member of the tree blocked reading the input: on Windows, which does not say which
    /// process waits on a pipe, the command's own pid.
    #[cfg(windows)]
    fn member_reading(&self) -> Option<i32> {
        let (root, cgroup) = self.tree()?;
        let InputTarget::PendingRead(pipe) = self.input.as_ref()?;
        pipe.blocked(cgroup.and_then(|c| c.cpu_ns()))
            .then_some(root.pid)
    }

    /// A member of the tree blocked reading the input: its pid.
    #[cfg(unix)]
    fn member_reading(&self) -> Option<i32> {
        let (root, cgroup) = self.tree()?;
        let members = self.find(cgroup.as_deref()).members(&root);
        match self.input.as_ref()? {
            InputTarget::Pipe(ino) => {
                let source = Source::Pipe(*ino);
                members
                    .into_iter()
                    .map(|(pid, _)| pid)
                    .find(|pid| input::blocked_on(*pid, &source))
            }
            InputTarget::Tty(master) => tty_reader(members, master),
        }
    }
}

/// A member of `members` in the terminal's foreground group blocked reading it: its pid.
#[cfg(unix)]
fn tty_reader(members: Vec<(i32, crate::platform::StartTime)>, master: &Master) -> Option<i32> {
    let fg = master.foreground()?;
    let source = Source::Tty(master.path.clone());
    members
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|pid| proc::stat(*pid).is_some_and(|s| s.pgrp == fg))
        .find(|pid| input::blocked_on(*pid, &source))
}

/// Whether a member of `root`'s tree (in `cgroup`) reads its terminal now (for the first stdin
/// write).
#[cfg(unix)]
pub fn reads_terminal(
    table: &Table,
    root: &TreeRoot,
    cgroup: Option<&ProcCgroup>,
    master: &Master,
) -> bool {
    let find = Find::Own {
        cgroup,
        tracked: table,
    };
    tty_reader(find.members(root), master).is_some()
}
