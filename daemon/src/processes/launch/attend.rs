//! Who attends to a new process: the watch of its MCP client's exit (`orphan_timeout`,
//! `client_gone`), the rules for when nobody does (`unwatched_timeout`), and when a terminal's
//! program first reads (its first input waits for it).

use super::{stdin, Launcher};
use crate::parts::tree::TreeRoot;
use crate::processes::supervise::{Leftover, Orphan};
use crate::state::caller::Caller;
use crate::state::record::Writer;

impl Launcher {
    /// The watch of `caller`'s exit and what becomes of the process unattended (`session`: a
    /// session's shell).
    pub(super) fn attendance(&self, caller: &Caller, session: bool) -> (Option<Orphan>, Leftover) {
        let leftover = Leftover::new(
            self.budgets.agents().rules(&caller.client),
            &caller.client.name,
            self.asks.clone(),
            session,
        );
        let orphan = Orphan::of(
            &caller.client,
            caller.peer.pid,
            self.orphan,
            leftover.watches_client(),
        );
        (orphan, leftover)
    }

    /// A terminal's first write waits for its program to read it, where the OS says when
    /// (not Windows).
    #[cfg_attr(windows, allow(unused_variables))]
    pub(super) fn first_read(
        &self,
        sink: &stdin::StdinSink,
        p: &Writer,
        root: &TreeRoot,
    ) -> Option<stdin::Reads> {
        match sink {
            #[cfg(unix)]
            stdin::StdinSink::Pty(master) => {
                let (table, root, master) = (self.table.clone(), root.clone(), master.clone());
                let cgroup = p.lock().cgroup.clone();
                let reads: stdin::Reads = Box::new(move || {
                    crate::processes::supervise::reads_terminal(
                        &table,
                        &root,
                        cgroup.as_deref(),
                        &master,
                    ) || crate::platform::proc::live(root.pid).is_none()
                });
                Some(reads)
            }
            _ => None,
        }
    }
}
