//! The rows of a listing: every running record, and the newest finished ones up to a limit,
//! without copying (or, unfiltered, even looking at) the finished records not returned.

use std::sync::Arc;

use cuba_protocol::ListRequest;

use super::{live, Table};
use crate::state::record::{Proc, ProcData};

impl Table {
    /// The records `r` asks for, newest first, and how many finished and running ones matched
    /// but were left out by its `finished` and `running` limits. Unfiltered, the cost is that of the running records
    /// and the rows returned, however many finished records are kept; with a filter every
    /// record is compared (under its lock, nothing copied).
    /// With a `tenant`, only that confined caller's records.
    pub fn select(&self, r: &ListRequest, tenant: Option<&Arc<str>>) -> Selected {
        let keep = |rec: &ProcData| {
            let i = rec.info();
            tenant.is_none_or(|t| rec.tenant.as_ref() == Some(t))
                && r.state.is_none_or(|s| i.state == s)
                && r.owner.as_ref().is_none_or(|o| &i.owner.name == o)
                && r.name.as_ref().is_none_or(|n| i.name.as_ref() == Some(n))
        };
        let most = r.finished.map_or(usize::MAX, |n| n as usize);
        let most_running = r.running.map_or(usize::MAX, |n| n as usize);
        let filtered =
            tenant.is_some() || r.state.is_some() || r.owner.is_some() || r.name.is_some();
        let contents = self.lock();
        let mut out = Selected::default();
        let (mut shown, mut shown_running) = (0usize, 0usize);
        if r.finished.is_some() && !filtered {
            // Running ones from the live set (newest first); finished ones from the newest
            // back, until enough.
            let mut running = 0usize;
            for p in live(&contents).rev().filter(|p| !p.lock().finished()) {
                running += 1;
                match running <= most_running {
                    true => out.rows.push(p.clone()),
                    false => out.hidden_running += 1,
                }
            }
            let mut shown_finished = Vec::new();
            for p in contents.procs.values().rev() {
                if shown_finished.len() >= most {
                    break;
                }
                if p.lock().finished() {
                    shown_finished.push(p.clone());
                }
            }
            let finished = contents.procs.len().saturating_sub(running);
            out.hidden = finished.saturating_sub(shown_finished.len()) as u64;
            out.rows.extend(shown_finished);
            out.rows.sort_unstable_by_key(|p| std::cmp::Reverse(p.id));
            return out;
        }
        for p in contents.procs.values().rev() {
            let rec = p.lock();
            if !keep(&rec) {
                continue;
            }
            let (count, limit, left_out) = match rec.finished() {
                true => (&mut shown, most, &mut out.hidden),
                false => (&mut shown_running, most_running, &mut out.hidden_running),
            };
            if *count >= limit {
                *left_out += 1;
                continue;
            }
            *count += 1;
            drop(rec);
            out.rows.push(p.clone());
        }
        out
    }
}

/// What a listing returns: its records, newest first, and how many finished and running ones
/// matched but were left out by the request's limits.
#[derive(Default)]
pub struct Selected {
    pub rows: Vec<Arc<Proc>>,
    pub hidden: u64,
    pub hidden_running: u64,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use cuba_protocol::{ProcKind, ProcState};

    use super::*;
    use crate::parts::reaper::Exit;
    use crate::state::record::Outcome;
    use crate::state::table::tests::{new, reserve, table};

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
        let got = t.select(&unfiltered, None);
        assert_eq!(ids(&got.rows), [20, 19, 18, 16, 11, 6, 1]);
        assert_eq!((got.hidden, got.hidden_running), (13, 0));
        // A filter compares every record: the same answer for the same question.
        let exited = ListRequest {
            state: Some(ProcState::Exited),
            finished: Some(3),
            ..ListRequest::default()
        };
        let got = t.select(&exited, None);
        assert_eq!((ids(&got.rows), got.hidden), (vec![20, 19, 18], 13));
        let all_of_them = ListRequest::default();
        assert_eq!(t.select(&all_of_them, None).rows.len(), 20);
        assert_eq!(t.count_running(), 4);
        assert_eq!(t.running().len(), 4);
        // No finished row at all: the running ones, the rest counted.
        let none = ListRequest {
            finished: Some(0),
            ..ListRequest::default()
        };
        let got = t.select(&none, None);
        assert_eq!((ids(&got.rows), got.hidden), (vec![16, 11, 6, 1], 16));
        // At most two running: the newest two, the others counted; with a filter the same.
        for state in [None, Some(ProcState::Running)] {
            let two = ListRequest {
                state,
                finished: Some(1),
                running: Some(2),
                ..ListRequest::default()
            };
            let got = t.select(&two, None);
            let finished = if state.is_none() { vec![20] } else { vec![] };
            let expected: Vec<u64> = finished.into_iter().chain([16, 11]).collect();
            assert_eq!(ids(&got.rows), expected, "{state:?}");
            assert_eq!(got.hidden_running, 2, "{state:?}");
        }
    }
}
