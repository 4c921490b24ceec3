//! `List`: the shared table, filtered by state and owner.

use cuba_protocol::{ListRequest, ProcessInfo};

use crate::daemon::Daemon;

pub fn list(d: &Daemon, r: &ListRequest) -> Vec<ProcessInfo> {
    d.table()
        .all()
        .iter()
        .map(|p| p.info())
        .filter(|i| r.state.is_none_or(|s| i.state == s))
        .filter(|i| r.owner.as_ref().is_none_or(|o| &i.owner.name == o))
        .collect()
}
