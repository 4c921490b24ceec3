//! The event log: what happened to processes, each event with a sequence number that is its
//! cursor, in a ring of the last `events_keep` (4096 unless set). Every event is also a journal
//! line, so a restart (or an in-place upgrade, whose new program loads the same journal) goes
//! on with the events kept and the seq after the highest: a seq is never reused.
//!
//! Writers are the places where things happen (the table's start and end, the supervisor's
//! waiting-for-input and limits, the asks, the port watcher, a client's pattern). Readers are
//! adapters that wait on one `watch` channel and read from their own cursor: the `Events`
//! request (once or followed), the desktop notification of asks; a new channel is one more.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use cuba_protocol::{now_ms, Event, EventBatch, EventKind, MAX_EVENTS_PER_BATCH};
use tokio::sync::watch;

use crate::state::journal::{Journal, Logged, MAX_EVENTS};

/// Events kept unless `events_keep` says otherwise.
pub const KEEP: usize = 4096;
/// Patterns one process's output may be watched for at once ([`Events::watch_output`]).
pub const MAX_PATTERNS: usize = 4;

/// The last events, oldest first, and the seq the next one gets.
#[derive(Debug, Default)]
pub struct Ring {
    keep: usize,
    events: VecDeque<Logged>,
    next: u64,
}

/// What one caller may read: everything, or one confined caller's own processes' events.
#[derive(Clone, Copy)]
pub enum View<'a> {
    All,
    Tenant(&'a str),
}

impl View<'_> {
    fn sees(&self, logged: &Logged) -> bool {
        match self {
            View::All => true,
            View::Tenant(t) => logged.tenant.as_deref() == Some(*t),
        }
    }
}

impl Ring {
    /// A ring of `keep` (at least one, at most the journal's load bound) holding the last of
    /// `events`, whose next seq is `next` (or past the last of them).
    pub fn new(keep: usize, mut events: VecDeque<Logged>, next: u64) -> Ring {
        let keep = keep.clamp(1, MAX_EVENTS);
        while events.len() > keep {
            events.pop_front();
        }
        let after = events.back().map_or(1, |l| l.event.seq + 1);
        Ring {
            keep,
            events,
            next: next.max(after).max(1),
        }
    }

    /// This ring, its next seq at least `next` (what an earlier program of this pid gave). The
    /// in-place hand-over is Unix's only.
    #[cfg(unix)]
    pub fn at_least(mut self, next: u64) -> Ring {
        self.next = self.next.max(next);
        self
    }

    fn push(&mut self, id: Option<u64>, tenant: Option<String>, kind: EventKind) -> &Logged {
        let event = Event {
            seq: self.next,
            at_ms: now_ms(),
            id,
            kind,
        };
        self.next += 1;
        if self.events.len() >= self.keep {
            self.events.pop_front();
        }
        self.events.push_back(Logged { event, tenant });
        // Just pushed: never empty here.
        &self.events[self.events.len() - 1]
    }

    /// The events at or after `since` that `view` sees (of process `id` if given), at most
    /// `max` (0: the batch bound); `next` is past every event considered, `lost` counts those
    /// at or after `since` that the ring no longer holds.
    pub fn read(&self, since: Option<u64>, id: Option<u64>, view: View, max: u32) -> EventBatch {
        let max = match max {
            0 => MAX_EVENTS_PER_BATCH,
            m => m.min(MAX_EVENTS_PER_BATCH),
        } as usize;
        let oldest = self.events.front().map_or(self.next, |l| l.event.seq);
        let from = since.unwrap_or(oldest);
        let lost = oldest.saturating_sub(from);
        let start = self.events.partition_point(|l| l.event.seq < from);
        let mut events = Vec::new();
        // A cursor past the end (nothing newer exists) goes on from the end.
        let mut next = self.next;
        for logged in self.events.iter().skip(start) {
            if events.len() == max {
                next = logged.event.seq;
                break;
            }
            if view.sees(logged) && id.is_none_or(|id| logged.event.id == Some(id)) {
                events.push(logged.event.clone());
            }
        }
        EventBatch { events, next, lost }
    }

    /// The events kept, oldest first (for the journal's compaction).
    pub fn kept(&self) -> Vec<Logged> {
        self.events.iter().cloned().collect()
    }

    pub fn next_seq(&self) -> u64 {
        self.next
    }
}

/// The log: its ring, the journal it is persisted with, and the channel its readers wait on.
pub struct Events {
    /// std Mutex: held for a push (and its journal line, so lines are in seq order) or a
    /// bounded read, never across an await. The journal's lock is a leaf below it.
    ring: Mutex<Ring>,
    journal: Arc<Journal>,
    /// The seq after the newest event: every reader wakes on a change.
    changed: watch::Sender<u64>,
    /// Patterns registered per running process ([`Events::watch_output`]).
    patterns: Mutex<HashMap<u64, usize>>,
}

impl Events {
    pub fn new(journal: Arc<Journal>, ring: Ring) -> Events {
        let next = ring.next;
        Events {
            ring: Mutex::new(ring),
            journal,
            changed: watch::Sender::new(next),
            patterns: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts the events a journal held in place of the (still empty) ring: at start-up.
    pub fn restore(&self, ring: Ring) {
        let next = ring.next;
        *self.lock() = ring;
        self.changed.send_replace(next);
    }

    /// Logs `kind` about process `id` (of confined caller `tenant`), journals it, and wakes
    /// every reader.
    pub fn emit(&self, id: Option<u64>, tenant: Option<&str>, kind: EventKind) {
        let next = {
            let mut ring = self.lock();
            let logged = ring.push(id, tenant.map(String::from), kind);
            if !self.journal.event(logged) {
                tracing::debug!(seq = logged.event.seq, "event not journalled (disk full)");
            }
            ring.next
        };
        self.changed.send_replace(next);
    }

    /// A batch as [`Ring::read`] makes it.
    pub fn read(&self, since: Option<u64>, id: Option<u64>, view: View, max: u32) -> EventBatch {
        self.lock().read(since, id, view, max)
    }

    /// Wakes on every later event.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The events kept and the next seq, for the journal's compaction.
    pub fn kept(&self) -> Vec<Logged> {
        self.lock().kept()
    }

    /// The seq the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq()
    }

    /// How many events are kept (journal lines a compaction writes).
    pub fn kept_len(&self) -> usize {
        self.lock().events.len()
    }

    /// Takes one of process `id`'s [`MAX_PATTERNS`] places for a watched pattern; the place is
    /// given back when the returned guard drops. `None`: all are taken.
    pub fn watch_output(self: &Arc<Self>, id: u64) -> Option<PatternPlace> {
        let mut patterns = self.patterns.lock().unwrap_or_else(|e| e.into_inner());
        let taken = patterns.entry(id).or_insert(0);
        if *taken >= MAX_PATTERNS {
            return None;
        }
        *taken += 1;
        Some(PatternPlace {
            events: self.clone(),
            id,
        })
    }
}

/// One watched pattern's place ([`Events::watch_output`]), given back on drop.
pub struct PatternPlace {
    events: Arc<Events>,
    id: u64,
}

impl Drop for PatternPlace {
    fn drop(&mut self) {
        let mut patterns = self
            .events
            .patterns
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(taken) = patterns.get_mut(&self.id) {
            *taken = taken.saturating_sub(1);
            if *taken == 0 {
                patterns.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::BTreeMap;

    fn port(port: u16) -> EventKind {
        EventKind::PortOpened { port }
    }

    fn seqs(batch: &EventBatch) -> Vec<u64> {
        batch.events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn the_ring_keeps_the_last_n_and_counts_what_a_late_reader_lost() {
        let mut ring = Ring::new(3, VecDeque::new(), 1);
        for p in 0..5 {
            ring.push(Some(1), None, port(p));
        }
        let all = ring.read(None, None, View::All, 0);
        assert_eq!((seqs(&all), all.next, all.lost), (vec![3, 4, 5], 6, 0));
        // From seq 1: 1 and 2 were dropped.
        let late = ring.read(Some(1), None, View::All, 0);
        assert_eq!((seqs(&late), late.lost), (vec![3, 4, 5], 2));
        // Bounded: the cursor stops at the first event not sent.
        let two = ring.read(Some(3), None, View::All, 2);
        assert_eq!((seqs(&two), two.next), (vec![3, 4], 5));
        // Caught up: nothing, the same cursor; past the end: the end.
        let none = ring.read(Some(6), None, View::All, 0);
        assert_eq!((seqs(&none), none.next, none.lost), (vec![], 6, 0));
        assert_eq!(ring.read(Some(60), None, View::All, 0).next, 6);
    }

    #[test]
    fn a_confined_view_and_a_process_filter_see_only_theirs_but_move_past_all() {
        let mut ring = Ring::new(10, VecDeque::new(), 1);
        ring.push(Some(1), Some("a".into()), port(1));
        ring.push(Some(2), None, port(2));
        ring.push(Some(3), Some("a".into()), port(3));
        let mine = ring.read(None, None, View::Tenant("a"), 0);
        assert_eq!((seqs(&mine), mine.next), (vec![1, 3], 4));
        let one = ring.read(None, Some(2), View::All, 0);
        assert_eq!(seqs(&one), vec![2]);
        assert!(ring
            .read(None, Some(2), View::Tenant("a"), 0)
            .events
            .is_empty());
    }

    #[test]
    fn seq_goes_on_after_a_reload_from_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let journal = Arc::new(Journal::create(path.clone(), &BTreeMap::new(), 1, &[]).unwrap());
        let events = Events::new(journal, Ring::new(2, VecDeque::new(), 1));
        for p in 0..3 {
            events.emit(Some(7), None, port(p));
        }
        let loaded = Journal::load(&path).unwrap();
        assert_eq!(loaded.next_seq, 4);
        let ring = Ring::new(2, loaded.events, loaded.next_seq);
        let batch = ring.read(None, None, View::All, 0);
        assert_eq!((seqs(&batch), batch.next), (vec![2, 3], 4));
        // A compaction keeps the events kept, so the next seq survives it too.
        let again = dir.path().join("again.jsonl");
        Journal::create(again.clone(), &BTreeMap::new(), 1, &ring.kept()).unwrap();
        assert_eq!(Journal::load(&again).unwrap().next_seq, 4);
    }

    #[test]
    fn a_process_has_a_bounded_number_of_watched_patterns() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::create(dir.path().join("j"), &BTreeMap::new(), 1, &[]).unwrap();
        let events = Arc::new(Events::new(
            Arc::new(journal),
            Ring::new(KEEP, VecDeque::new(), 1),
        ));
        let places: Vec<_> = (0..MAX_PATTERNS)
            .map(|_| events.watch_output(1).unwrap())
            .collect();
        assert!(events.watch_output(1).is_none());
        assert!(
            events.watch_output(2).is_some(),
            "another process has its own"
        );
        drop(places);
        assert!(events.watch_output(1).is_some(), "given back");
    }
}
