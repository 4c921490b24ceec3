//! The daemon's main loop: restore state, accept connections (peer uid checked first, at most
//! `max_connections`, a refusal even when descriptors ran out: `admission.rs`), prune expired
//! records, and on shutdown stop every process gracefully.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cuba_protocol::{handshake, safe_fs, Signal};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};

use crate::base::admission::Slots;
use crate::base::config::Config;
use crate::parts::reaper::Reaper;
use crate::parts::tree;
use crate::platform::cgroup::Cgroups;
use crate::platform::limits::Limiter;
use crate::platform::transport::{self, Check, Listener, Lock, Raw};
use crate::processes::launch::Launcher;
use crate::serving::conn;
use crate::serving::daemon::Daemon;
#[cfg(unix)]
use crate::serving::handover::{self, Inherited};
pub use crate::serving::takeover::Handed;
use crate::serving::takeover::Takeover;
use crate::state::audit::Audit;
use crate::state::events::Ring;
use crate::state::journal::Journal;
use crate::state::record::{Control, StopCause};
use crate::state::restore;
use crate::state::state_dir::StateDir;
use crate::state::table::{Settings, Table};

/// Runs the daemon on `listener` until `shutdown` completes or a client asks it to stop.
/// `lock` is the socket's lock file (kept across an upgrade); `handed`, what an earlier
/// program of this pid handed over.
pub async fn run(
    config: Config,
    mut listener: Listener,
    lock: Lock,
    handed: Option<Handed>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let d = Arc::new(start(config, handed)?);
    tracing::info!(
        pid = d.pid(),
        socket = %d.config().socket.display(),
        state = %d.config().state_dir.display(),
        "cubad {} ready", cuba_protocol::VERSION
    );
    let pruner = tokio::spawn(prune_expired(d.clone()));
    let ports = tokio::spawn(crate::processes::ports::watch(d.table().clone()));
    let mut conns = JoinSet::new();
    let slots = Slots::new(d.config().max_connections);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            (stream, check) = listener.accept() => {
                accept(&d, (stream, check), slots.take().ok_or_else(|| slots.refusal()), &mut conns);
            }
            Some(_) = conns.join_next() => {}
            binary = d.upgrade_asked() => {
                // Every connection closes first: its client reconnects to the new program
                // (the socket stays open meanwhile: connects wait in its backlog).
                conns.abort_all();
                let _ = timeout_at(Instant::now() + Duration::from_secs(2), async {
                    while conns.join_next().await.is_some() {}
                })
                .await;
                let why = upgrade(&d, &listener, lock, &binary).await;
                tracing::warn!("upgrade to {} did not happen: {why}", binary.path.display());
                d.upgrade_failed(why);
            }
            _ = &mut shutdown => break,
            _ = d.shutdown().cancelled() => break,
        }
    }
    tracing::info!("shutting down");
    d.shutdown().cancel();
    pruner.abort();
    ports.abort();
    stop_all(&d).await;
    d.launcher().remove_cgroups();
    let _ = timeout_at(Instant::now() + Duration::from_secs(2), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

/// Everything the daemon needs before it serves: the state directory, the sandbox check, the
/// reaper, the table restored from the journal, the resource limits.
fn start(config: Config, handed: Option<Handed>) -> Result<Daemon> {
    // Owner-only: the state holds every process's output.
    crate::state::private_dir::ensure(
        &config.state_dir,
        "state directory",
        "set CUBA_EXEC_STATE_DIR (or --state-dir) to a directory of your own",
    )
    .map_err(anyhow::Error::msg)?;
    crate::processes::launch::proxy_rules(&config.sandbox)
        .map_err(|e| anyhow::anyhow!("the proxy's rules ([proxy] / CUBA_EXEC_PROXY_*): {e}"))?;
    // Before the reaper exists: the probe waits for its own child.
    crate::platform::sandbox::probe(
        &config.sandbox,
        &config.policy.dirs,
        &config.shell,
        &config.state_dir,
    )
    .context("the configured sandbox is not available")?;
    let mut taken = Takeover::of(handed);
    let (reaper, exits) =
        Reaper::start_adopting(&taken.pids()).context("cannot become a child subreaper")?;
    let state = StateDir::new(config.state_dir.clone());
    let instance = instance_id(&state)?;
    let journal_path = state.journal();
    let mut loaded = Journal::load(&journal_path)
        .with_context(|| format!("cannot read {}", journal_path.display()))?;
    let (handed_ids, handed_leaves) = taken.kept();
    // Running under the daemon that stopped: the restore ends them `lost`, an event each.
    let lost: Vec<u64> = (loaded.records.iter())
        .filter(|(id, r)| !r.info.state.is_finished() && !handed_ids.contains(id))
        .map(|(id, _)| *id)
        .collect();
    let ring = Ring::new(
        config.events_keep,
        std::mem::take(&mut loaded.events),
        loaded.next_seq,
    );
    let ring = taken.events(ring);
    let (mut contents, mut records) = restore::restore(&state, config.grace, loaded, &handed_ids);
    let adopted = taken.records(&mut contents, &mut records, exits);
    let next_id = contents.next_id;
    let journal = Journal::create(journal_path.clone(), &records, next_id, &ring.kept())
        .with_context(|| format!("cannot write {}", journal_path.display()))?;
    let limiter = Limiter::setup(&config.limits)
        .context("the configured resource limits cannot be applied")?;
    // After the restore: what it could not find by pid and marker is killed with its cgroup.
    let cgroups = Cgroups::setup(
        &config.limits.cgroups,
        &config.limits,
        &instance,
        (&handed_ids, &handed_leaves),
    )
    .context("the configured resource limits cannot be applied")?;
    tracing::info!("supervision: {}", cgroups.mode());
    let audit = Audit::new(state.audit(), config.audit_stderr, config.audit_max);
    let settings = Settings {
        state,
        instance,
        daemon_pid: std::process::id(),
        max_procs: config.max_procs,
        buffer_size: config.buffer_size,
        spool_cap: config.spool_cap,
        max_finished: config.max_finished,
    };
    let table = Arc::new(Table::new(settings, contents, journal, audit));
    table.events().restore(ring);
    for p in lost.iter().filter_map(|id| table.get(*id).ok()) {
        table.exited(&p);
    }
    table.tokens().import(taken.tokens());
    let defaults = (
        config.grace,
        (config.orphan_timeout, config.agents.clone()),
        config.shell.clone(),
        config.sandbox.clone(),
    );
    let limits = (Arc::new(limiter), Arc::new(cgroups));
    let exec = crate::processes::launch::ExecChecking::start(&config);
    tracing::info!("exec checks: {}", exec.describe());
    let asks = crate::state::asks::Asks::new(
        table.clone(),
        config.approvals_file.clone(),
        config.approval_timeout,
        config.notify.clone(),
        tokio::runtime::Handle::current(),
    );
    let askpass = crate::processes::launch::askpass_env(&config.exe, &config.socket);
    let launcher = Launcher::new(table, reaper, limits, defaults, (exec, asks, askpass));
    Ok(taken.adopt(Daemon::new(config, launcher), adopted))
}

/// Hands over to `binary`; returns only if that did not happen, with why.
#[cfg(unix)]
async fn upgrade(
    d: &Arc<Daemon>,
    listener: &Listener,
    lock: Lock,
    binary: &crate::serving::new_program::Accepted,
) -> String {
    let inherited = Inherited {
        listener: listener.raw_fd(),
        lock,
    };
    handover::hand_over(d, inherited, binary).await
}

#[cfg(windows)]
async fn upgrade(
    _: &Arc<Daemon>,
    _: &Listener,
    _: Lock,
    _: &crate::serving::new_program::Accepted,
) -> String {
    let f = crate::platform::capability::UPGRADES;
    format!("{} are not offered on Windows{}", f.name, f.instead)
}

/// `slot`: the connection's place under `max_connections`, taken at accept, or the refusal
/// when there is none.
fn accept(
    d: &Arc<Daemon>,
    (stream, check): (Raw, Check),
    slot: Result<OwnedSemaphorePermit, String>,
    conns: &mut JoinSet<()>,
) {
    let d = d.clone();
    conns.spawn(async move {
        match (check, slot) {
            (Check::Ours(peer), Ok(slot)) => conn::serve(d, stream, peer, slot).await,
            (Check::Ours(peer), Err(full)) => {
                tracing::debug!(pid = ?peer.pid, "refused a connection over the limit");
                transport::refuse(stream, handshake::encode_refusal(d.pid(), &full)).await;
            }
            (Check::Foreign { peer, why }, _) => {
                tracing::warn!(uid = peer.uid, pid = ?peer.pid, "refused a peer of another user");
                let frame = handshake::encode_refusal_of_another_user(d.pid(), &why);
                transport::refuse(stream, frame).await;
            }
            (Check::Unreadable(e), _) => {
                tracing::warn!("cannot tell who the peer is, connection dropped: {e}")
            }
        }
    });
}

/// A token for this state directory, created once: it makes process markers unique even
/// between daemons whose ids overlap.
fn instance_id(state: &StateDir) -> Result<String> {
    let path = state.instance();
    match safe_fs::read_to_string(&path) {
        Ok(text) => {
            let t = text.trim();
            if !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Ok(t.to_string());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        // A link or a file not ours is refused: the daemon does not start on it.
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let token = format!("{:x}{:x}", nanos & 0xffff_ffff_ffff, std::process::id());
    safe_fs::write_new(&path, token.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(token)
}

async fn prune_expired(d: Arc<Daemon>) {
    let ttl = d.config().ttl;
    let period = (ttl / 10).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        d.table().prune(ttl);
    }
}

/// Stops every running process gracefully (TERM, grace, KILL) and waits for them, bounded.
async fn stop_all(d: &Daemon) {
    let running = d.table().running();
    let grace = d.config().grace;
    for p in &running {
        let control = p.lock().control.clone();
        if let Some(c) = control {
            let msg = Control::Signal {
                id: p.id,
                signal: Signal::Term,
                grace: Some(grace),
                stop: Some(StopCause::Shutdown),
            };
            let _ = c.send(msg).await;
        }
    }
    let deadline = Instant::now() + grace + Duration::from_secs(2);
    for p in &running {
        let mut changes = p.subscribe();
        loop {
            changes.borrow_and_update();
            if p.done() {
                break;
            }
            if !matches!(timeout_at(deadline, changes.changed()).await, Ok(Ok(()))) {
                // Out of time: make sure nothing of the tree survives us.
                let (root, cgroup) = {
                    let rec = p.lock();
                    (rec.root.clone(), rec.cgroup.clone())
                };
                if let Some(root) = root {
                    let cgroup = cgroup.as_deref();
                    let find = tree::Find::Own {
                        cgroup,
                        tracked: &**d.table(),
                    };
                    tree::kill_tree(&root, &find);
                }
                break;
            }
        }
    }
}
