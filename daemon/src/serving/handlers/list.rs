//! `List`: the shared table (a confined caller's own part of it), filtered by state, owner and name; finished rows the newest first
//! up to the request's limit, running ones the newest first up to its other limit, the rest
//! counted.

use cuba_protocol::{ListRequest, Listing, ProcessInfo};

use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

/// A confined caller's listing has its own records only, counted as if nobody else's existed.
pub fn list(d: &Daemon, caller: &Caller, r: &ListRequest) -> Listing {
    let got = d.table().select(r, caller.tenant.as_ref());
    // Figures are read for the rows returned only. By id, as every listing has been: the
    // newest were chosen, not reordered.
    let mut processes: Vec<ProcessInfo> = got.rows.iter().map(|p| p.listed()).collect();
    processes.reverse();
    Listing {
        processes,
        hidden: got.hidden,
        hidden_running: got.hidden_running,
        budgets: d.launcher().budgets().uses(caller, d.table()),
    }
}
