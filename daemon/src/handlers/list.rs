//! `List`: the shared table, filtered by state, owner and name; finished rows the newest first
//! up to the request's limit, running ones the newest first up to its other limit, the rest
//! counted.

use cuba_protocol::{ListRequest, Listing, ProcessInfo};

use crate::daemon::Daemon;

pub fn list(d: &Daemon, r: &ListRequest) -> Listing {
    let got = d.table().select(r);
    // Figures are read for the rows returned only. By id, as every listing has been: the
    // newest were chosen, not reordered.
    let mut processes: Vec<ProcessInfo> = got.rows.iter().map(|p| p.listed()).collect();
    processes.reverse();
    Listing {
        processes,
        hidden: got.hidden,
        hidden_running: got.hidden_running,
    }
}
