//! What an earlier program of this pid handed over at an in-place upgrade (`handover/`), taken
//! into the start-up: its processes' records, their exits (the reaper waits for them from the
//! first moment), the request tokens, the ids and the event log's next seq. On Windows, which
//! has no in-place upgrade, there is never anything to take over.

use std::collections::HashSet;

use tokio::sync::oneshot;

use crate::platform::Exit;
use crate::serving::daemon::Daemon;
use crate::state::events::Ring;
use crate::state::journal;
use crate::state::record::Writer;
use crate::state::table::Contents;
use crate::state::tokens::Exported;

/// What an earlier program of this pid handed over (`cubad --handover FD`).
#[cfg(unix)]
pub use crate::serving::handover::Handed;
/// Nothing is handed over on Windows, which has no in-place upgrade (`handlers::upgrade`).
#[cfg(windows)]
pub enum Handed {}

#[cfg(unix)]
pub use unix::Takeover;
#[cfg(windows)]
pub use windows::Takeover;

/// A taken-over process between its record and its supervisor.
#[cfg(unix)]
pub type Adopted = (
    Writer,
    crate::processes::launch::Adopted,
    oneshot::Receiver<Exit>,
);
#[cfg(windows)]
pub type Adopted = (Writer, std::convert::Infallible, oneshot::Receiver<Exit>);

#[cfg(unix)]
mod unix {
    use super::*;
    use crate::serving::handover::{Handed, Header, SavedProc};
    use crate::state::record::{Proc, ProcData};
    use std::sync::Arc;

    pub struct Takeover {
        header: Option<Header>,
        saved: Vec<SavedProc>,
    }

    impl Takeover {
        pub fn of(handed: Option<Handed>) -> Takeover {
            match handed {
                Some(h) => Takeover {
                    header: Some(h.header),
                    saved: h.procs,
                },
                None => Takeover {
                    header: None,
                    saved: Vec::new(),
                },
            }
        }

        /// The pids the reaper must wait for from its start.
        pub fn pids(&self) -> Vec<i32> {
            self.saved.iter().map(|p| p.info.pid as i32).collect()
        }

        /// The ids of the handed-over processes, and their cgroups' leaves (kept by the
        /// restore and the cgroup set-up).
        pub fn kept(&self) -> (HashSet<u64>, HashSet<u64>) {
            let ids = self.saved.iter().map(|p| p.info.id).collect();
            let leaves = self
                .saved
                .iter()
                .filter_map(|p| p.cgroup.map(|s| s.leaf))
                .collect();
            (ids, leaves)
        }

        /// The event log as the journal held it, going on past every seq the earlier
        /// program gave.
        pub fn events(&self, ring: Ring) -> Ring {
            match &self.header {
                Some(h) => ring.at_least(h.events_next),
                None => ring,
            }
        }

        pub fn tokens(&mut self) -> Vec<Exported> {
            self.header
                .as_mut()
                .map(|h| std::mem::take(&mut h.tokens))
                .unwrap_or_default()
        }

        /// Puts a record of each handed-over process into the table's contents and the
        /// journal's records; returns them for [`Takeover::adopt`].
        pub fn records(
            &mut self,
            contents: &mut Contents,
            records: &mut std::collections::BTreeMap<u64, journal::Record>,
            exits: Vec<oneshot::Receiver<Exit>>,
        ) -> Vec<Adopted> {
            let mut adopted = Vec::new();
            for (p, exit) in std::mem::take(&mut self.saved).into_iter().zip(exits) {
                let record = journal::Record {
                    info: p.info.clone(),
                    start_time: p.start_time,
                    marker: p.marker.clone(),
                    token: p.token,
                    tenant: p.tenant.clone(),
                    output: None,
                };
                let id = p.info.id;
                match p.take() {
                    Ok((output, a)) => {
                        let mut data = ProcData::new(a.info.clone(), output, false);
                        data.token = record.token;
                        data.tenant = record.tenant.as_deref().map(Arc::from);
                        let (proc, writer) = Proc::create(data);
                        contents.procs.insert(id, proc);
                        records.insert(id, record);
                        adopted.push((writer, a, exit));
                    }
                    Err(e) => tracing::error!(id, "cannot take over process: {e}"),
                }
            }
            if let Some(h) = &self.header {
                contents.next_id = contents.next_id.max(h.next_id);
            }
            adopted
        }

        /// Hands each taken-over process to a supervisor of this program; the daemon says
        /// it was upgraded.
        pub fn adopt(self, d: Daemon, adopted: Vec<Adopted>) -> Daemon {
            for (p, mut a, exit) in adopted {
                let route = a.session.take().map(|(name, nonce, pipe, conf)| {
                    d.sessions()
                        .adopt(p.proc().clone(), (name, nonce), pipe, conf)
                });
                let id = p.id;
                if let Err(e) = d.launcher().adopt(p, a, exit, route) {
                    tracing::error!(id, "cannot take over process: {e}");
                }
            }
            match self.header {
                Some(h) => {
                    tracing::info!(
                        processes = h.procs,
                        upgrade = h.upgrades + 1,
                        "took over from the previous program of this pid"
                    );
                    d.upgraded(h.started_at_ms, h.upgrades + 1)
                }
                None => d,
            }
        }
    }
}

#[cfg(windows)]
mod windows {
    use super::*;

    pub struct Takeover;

    impl Takeover {
        pub fn of(handed: Option<Handed>) -> Takeover {
            match handed {
                Some(never) => match never {},
                None => Takeover,
            }
        }

        pub fn pids(&self) -> Vec<i32> {
            Vec::new()
        }

        pub fn kept(&self) -> (HashSet<u64>, HashSet<u64>) {
            (HashSet::new(), HashSet::new())
        }

        pub fn tokens(&mut self) -> Vec<Exported> {
            Vec::new()
        }

        pub fn events(&self, ring: Ring) -> Ring {
            ring
        }

        pub fn records(
            &mut self,
            _: &mut Contents,
            _: &mut std::collections::BTreeMap<u64, journal::Record>,
            _: Vec<oneshot::Receiver<Exit>>,
        ) -> Vec<Adopted> {
            Vec::new()
        }

        pub fn adopt(self, d: Daemon, _: Vec<Adopted>) -> Daemon {
            d
        }
    }
}
