//! `List`: the shared table, filtered by state, owner and name; finished rows the newest first
//! up to the request's limit, the rest counted.

use cuba_protocol::{ListRequest, Listing, ProcessInfo};

use crate::daemon::Daemon;

pub fn list(d: &Daemon, r: &ListRequest) -> Listing {
    let (rows, hidden) = d.table().select(r);
    // By id, as every listing has been: the newest finished ones were chosen, not reordered.
    let mut processes: Vec<ProcessInfo> = rows.iter().map(|p| p.listed()).collect();
    processes.reverse();
    Listing { processes, hidden }
}
