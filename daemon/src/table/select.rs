//! The rows of a listing: every running record, and the newest finished ones up to a limit,
//! without copying (or, unfiltered, even looking at) the finished records not returned.

use std::sync::Arc;

use cuba_protocol::{ListRequest, ProcessInfo};

use super::{live, Table};
use crate::record::Proc;

impl Table {
    /// The records `r` asks for, newest first, and how many finished ones matched but were
    /// left out by its `finished` limit. Unfiltered, the cost is that of the running records
    /// and the rows returned, however many finished records are kept; with a filter every
    /// record is compared (under its lock, nothing copied).
    pub fn select(&self, r: &ListRequest) -> (Vec<Arc<Proc>>, u64) {
        let keep = |i: &ProcessInfo| {
            r.state.is_none_or(|s| i.state == s)
                && r.owner.as_ref().is_none_or(|o| &i.owner.name == o)
                && r.name.as_ref().is_none_or(|n| i.name.as_ref() == Some(n))
        };
        let most = r.finished.map(|n| n as usize);
        let filtered = r.state.is_some() || r.owner.is_some() || r.name.is_some();
        let contents = self.lock();
        let mut rows: Vec<Arc<Proc>> = Vec::new();
        let (mut shown, mut hidden) = (0usize, 0u64);
        if let (Some(most), false) = (most, filtered) {
            // Running ones from the live set; finished ones from the newest back, until enough.
            rows.extend(live(&contents).filter(|p| !p.lock().finished()).cloned());
            let running = rows.len();
            let mut shown_finished = Vec::new();
            for p in contents.procs.values().rev() {
                if shown_finished.len() >= most {
                    break;
                }
                if p.lock().finished() {
                    shown_finished.push(p.clone());
                }
            }
            shown = shown_finished.len();
            let finished = contents.procs.len().saturating_sub(running);
            hidden = finished.saturating_sub(shown) as u64;
            rows.extend(shown_finished);
            rows.sort_unstable_by_key(|p| std::cmp::Reverse(p.id));
            return (rows, hidden);
        }
        for p in contents.procs.values().rev() {
            let rec = p.lock();
            if !keep(&rec.info) {
                continue;
            }
            if rec.finished() {
                if most.is_some_and(|most| shown >= most) {
                    hidden += 1;
                    continue;
                }
                shown += 1;
            }
            drop(rec);
            rows.push(p.clone());
        }
        (rows, hidden)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use cuba_protocol::{ProcKind, ProcState};

    use super::*;
    use crate::reaper::Exit;
    use crate::record::Outcome;
    use crate::table::tests::{new, reserve, table};

    fn ids(rows: &[Arc<Proc>]) -> Vec<u64> {
        rows.iter().map(|p| p.id).collect()
    }

    #[test]
    fn running_ones_always_and_the_newest_finished_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path(), 100);
        let mut all = Vec::new();
        for i in 0..20 {
            let kind = ProcKind::Command;
            let p = new(reserve(
                &t,
                if i % 5 == 0 { "serve" } else { "true" },
                kind,
                false,
            ));
            all.push(p);
        }
        // 1, 6, 11 and 16 run on; the others end.
        for p in all.iter().filter(|p| p.id % 5 != 1) {
            t.finish(p, Outcome::of_exit(None, Exit::Code(0)));
        }
        let unfiltered = ListRequest {
            finished: Some(3),
            ..ListRequest::default()
        };
        let (rows, hidden) = t.select(&unfiltered);
        assert_eq!(ids(&rows), [20, 19, 18, 16, 11, 6, 1]);
        assert_eq!(hidden, 13);
        // A filter compares every record: the same answer for the same question.
        let exited = ListRequest {
            state: Some(ProcState::Exited),
            finished: Some(3),
            ..ListRequest::default()
        };
        let (rows, hidden) = t.select(&exited);
        assert_eq!((ids(&rows), hidden), (vec![20, 19, 18], 13));
        let all_of_them = ListRequest::default();
        assert_eq!(t.select(&all_of_them).0.len(), 20);
        assert_eq!(t.count_running(), 4);
        assert_eq!(t.running().len(), 4);
        // No finished row at all: the running ones, the rest counted.
        let none = ListRequest {
            finished: Some(0),
            ..ListRequest::default()
        };
        let (rows, hidden) = t.select(&none);
        assert_eq!((ids(&rows), hidden), (vec![16, 11, 6, 1], 16));
    }
}
