//! Pruning: finished records removed with their spools, by age, beyond the cap, or all of
//! one confined caller's.

use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::now_ms;

use super::Table;
use crate::parts::output::Spool;
use crate::state::record::Proc;

impl Table {
    /// Removes finished records that ended more than `age` ago (all finished ones for zero),
    /// and the oldest beyond `max_finished`, with their spools. Returns how many.
    pub fn prune(&self, age: Duration) -> u64 {
        self.prune_where(Some(age), None)
    }

    /// Every finished record of confined caller `tenant` now (`None`: of everyone).
    pub fn prune_of(&self, tenant: Option<&Arc<str>>) -> u64 {
        self.prune_where(Some(Duration::ZERO), tenant)
    }

    /// [`Table::prune`]; with no `age`, only the records beyond `max_finished`; with a
    /// `tenant`, only its records.
    pub(super) fn prune_where(&self, age: Option<Duration>, tenant: Option<&Arc<str>>) -> u64 {
        let cutoff =
            age.map(|a| now_ms().saturating_sub(u64::try_from(a.as_millis()).unwrap_or(u64::MAX)));
        let removed: Vec<Arc<Proc>> = {
            let mut contents = self.lock();
            // Finished with all output in, oldest end first.
            let mut done: Vec<(u64, u64)> = contents
                .procs
                .iter()
                .filter_map(|(id, p)| {
                    let rec = p.lock();
                    let theirs = tenant.is_none_or(|t| rec.tenant.as_ref() == Some(t));
                    (rec.finished() && rec.drained && theirs)
                        .then(|| (rec.info().ended_at_ms.unwrap_or(0), *id))
                })
                .collect();
            done.sort_unstable();
            let over = match tenant {
                None => done.len().saturating_sub(self.settings.max_finished),
                Some(_) => 0,
            };
            done.iter()
                .enumerate()
                .filter(|(i, (ended, _))| *i < over || cutoff.is_some_and(|c| *ended <= c))
                .filter_map(|(_, (_, id))| contents.procs.remove(id))
                .collect()
        };
        if removed.is_empty() {
            // The event log grows the journal without any prune: it is compacted all the same.
            let live = self.lock().procs.len() + self.events.kept_len();
            if self.journal.due(live) {
                let ((records, events), next_id) = self.records();
                let journal = self.journal.clone();
                crate::base::blocking::off_runtime(move || {
                    journal.compact((&records, &events), next_id);
                });
            }
            return 0;
        }
        // Wake followers and waiters: the record is gone.
        removed.iter().for_each(|p| p.notify());
        let ids: Vec<u64> = removed.iter().map(|p| p.id).collect();
        let spools: Vec<_> = ids
            .iter()
            .map(|&id| self.settings.state.spool(id))
            .collect();
        self.tokens.forget(&ids.iter().copied().collect());
        let live = self.lock().procs.len() + self.events.kept_len();
        let compact = self.journal.pruned(ids, live).then(|| self.records());
        let journal = self.journal.clone();
        // The files' removal and a compaction (synced) off the runtime's thread.
        crate::base::blocking::off_runtime(move || {
            Spool::remove_all(&spools);
            if let Some(((records, events), next_id)) = compact {
                journal.compact((&records, &events), next_id);
            }
        });
        self.changed();
        removed.len() as u64
    }
}
