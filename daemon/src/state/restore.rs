//! Start-up from the journal: finished records come back with their spools; processes that were
//! running under a dead daemon are stopped (whole tree, pids checked by start time) and marked
//! `lost`: never left orphaned, never silently forgotten.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::now_ms;

use crate::parts::output::{Output, Spool};
use crate::parts::tree::{self, TreeRoot};
use crate::platform::proc;
use crate::state::journal::{Loaded, Record};
use crate::state::record::{Outcome, Proc, ProcData};
use crate::state::state_dir::StateDir;
use crate::state::table::Contents;

/// Rebuilds the table's contents. Returns them with the records to write into the fresh
/// journal. Trees that were still alive get SIGTERM now and SIGKILL after `grace`, except
/// those of `handed`: processes an in-place upgrade handed over, still running and watched.
pub fn restore(
    state: &StateDir,
    grace: Duration,
    loaded: Loaded,
    handed: &HashSet<u64>,
) -> (Contents, BTreeMap<u64, Record>) {
    let mut procs = BTreeMap::new();
    let mut records = BTreeMap::new();
    let mut lost_roots = Vec::new();
    let mut machine = None;
    for (id, mut rec) in loaded.records {
        if handed.contains(&id) {
            continue;
        }
        let spool = Spool::open(state.spool(id)).ok();
        if !rec.info.state.is_finished() {
            let root = TreeRoot {
                pid: rec.info.pid as i32,
                start_time: rec.start_time,
                marker: rec.marker.clone(),
            };
            // One scan of the machine for every row left running, not one each.
            let procs = machine.get_or_insert_with(proc::scan);
            let stopped = tree::signal_tree(
                &root,
                cuba_protocol::Signal::Term.number(),
                &tree::Find::Among(procs),
            );
            if stopped > 0 {
                lost_roots.push(root);
            }
            let (stdout, stderr) = spool.as_ref().map_or((0, 0), Spool::stream_bytes);
            let why = format!(
                "cubad stopped while this process was running; on restart {stopped} process(es) \
                 of its tree were still alive and were stopped"
            );
            Outcome::lost(why).apply(&mut rec.info, now_ms());
            rec.info.stdout_bytes = stdout;
            rec.info.stderr_bytes = stderr;
            tracing::warn!(id, stopped, "process of a previous daemon marked lost");
        }
        let output = match (&rec.output, spool) {
            // Kept in the journal: it never had a spool.
            (Some(inline), None) => Output::from_inline(inline),
            (_, spool) => Output::restored(spool, rec.info.stdout_bytes, rec.info.stderr_bytes),
        };
        let mut data = ProcData::new(rec.info.clone(), output, true);
        data.token = rec.token;
        data.tenant = rec.tenant.as_deref().map(Arc::from);
        // Every restored record has ended: nothing writes it again.
        let (p, _ended) = Proc::create(data);
        procs.insert(id, p);
        records.insert(id, rec);
    }
    if !lost_roots.is_empty() {
        // They had SIGTERM; whatever still stands after the grace period gets SIGKILL.
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            for root in &lost_roots {
                tree::kill_tree(root, &tree::Find::Scan);
            }
        });
    }
    let contents = Contents {
        procs,
        next_id: loaded.next_id,
        ..Contents::default()
    };
    (contents, records)
}
