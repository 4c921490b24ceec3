//! What the table holds: the records, and what is kept with the set of running ones so that a
//! spawn's checks cost the same however many run.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use cuba_protocol::ProcKind;

use crate::state::record::Proc;

/// The records and the next id, as restored from the journal (or empty).
#[derive(Default)]
pub struct Contents {
    pub procs: BTreeMap<u64, Arc<Proc>>,
    pub next_id: u64,
    /// The ids of records not finished, so that what concerns running processes (admission,
    /// listings, the escapees' scope) costs nothing per finished record. Made by [`Table::new`]
    /// from `procs`; kept by [`Table::reserve`] and [`Table::finish`], the only ways into and
    /// out of running.
    pub live: BTreeSet<u64>,
    /// How many of `live` count against `max_procs` (commands in a session do not), and the
    /// live ones by name: a spawn's admission, `ensure` and namesake check cost the same
    /// however many run. Kept with `live`.
    pub running: usize,
    pub names: HashMap<String, BTreeSet<u64>>,
}

impl Contents {
    /// `id` (of `kind`, named `name`) runs.
    pub(super) fn enter(&mut self, id: u64, kind: ProcKind, name: Option<&String>) {
        if self.live.insert(id) {
            self.running += usize::from(kind != ProcKind::InSession);
            if let Some(name) = name {
                self.names.entry(name.clone()).or_default().insert(id);
            }
        }
    }

    /// `id` no longer runs.
    pub(super) fn leave(&mut self, id: u64, kind: ProcKind, name: Option<&String>) {
        if self.live.remove(&id) {
            self.running -= usize::from(kind != ProcKind::InSession);
            if let Some(ids) = name.and_then(|n| self.names.get_mut(n)) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.names.remove(name.map_or("", String::as_str));
                }
            }
        }
    }

    /// The live records named `name`.
    pub(super) fn named<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Arc<Proc>> + 'a {
        self.names
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|id| self.procs.get(id))
    }
}

/// The records not finished (or finishing just now).
pub(super) fn live(contents: &Contents) -> impl DoubleEndedIterator<Item = &Arc<Proc>> {
    contents.live.iter().filter_map(|id| contents.procs.get(id))
}
