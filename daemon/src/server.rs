//! The daemon's main loop: restore state, accept connections (peer uid checked first), prune
//! expired records, and on shutdown stop every process gracefully.

use std::future::Future;
use std::os::unix::fs::DirBuilderExt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cuba_protocol::Signal;
use tokio::net::UnixListener;
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};

use crate::config::Config;
use crate::daemon::Daemon;
use crate::journal::Journal;
use crate::proc::{Control, StopCause};
use crate::reaper::Reaper;
use crate::{conn, restore, tree};

/// Runs the daemon on `listener` until `shutdown` completes or a client asks it to stop.
pub async fn run(
    config: Config,
    listener: UnixListener,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    // Owner-only: the state holds every process's output.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&config.state_dir)
        .with_context(|| format!("cannot create state dir {}", config.state_dir.display()))?;
    // Before the reaper exists: the probe waits for its own child.
    crate::sandbox::probe(
        &config.sandbox,
        &config.policy.dirs,
        &config.shell,
        &config.state_dir,
    )
    .context("the configured sandbox is not available")?;
    let reaper = Reaper::start().context("cannot become a child subreaper")?;
    let instance = instance_id(&config)?;
    let journal_path = config.state_dir.join("journal.jsonl");
    let loaded = Journal::load(&journal_path)
        .with_context(|| format!("cannot read {}", journal_path.display()))?;
    let next_id = loaded.next_id;
    let (table, records) = restore::restore(&config, loaded);
    let journal = Journal::create(journal_path.clone(), &records, next_id)
        .with_context(|| format!("cannot write {}", journal_path.display()))?;
    let limiter = crate::limits::Limiter::setup(&config.limits, &instance)
        .context("the configured resource limits cannot be applied")?;
    let mut daemon = Daemon::new(config, instance, reaper, journal, table);
    daemon.limits = limiter;
    let d = Arc::new(daemon);
    tracing::info!(
        pid = d.pid,
        socket = %d.config.socket.display(),
        state = %d.config.state_dir.display(),
        "cubad {} ready", cuba_protocol::VERSION
    );
    let pruner = tokio::spawn(prune_expired(d.clone()));
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => accept(&d, stream, &mut conns),
                Err(e) => {
                    // EMFILE and the like: keep serving the connections we have.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next() => {}
            _ = &mut shutdown => break,
            _ = d.shutdown.cancelled() => break,
        }
    }
    tracing::info!("shutting down");
    d.shutdown.cancel();
    pruner.abort();
    stop_all(&d).await;
    let _ = timeout_at(Instant::now() + Duration::from_secs(2), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

fn accept(d: &Arc<Daemon>, stream: tokio::net::UnixStream, conns: &mut JoinSet<()>) {
    let d = d.clone();
    conns.spawn(async move {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == me => {
                let peer = crate::audit::Peer {
                    uid: cred.uid(),
                    pid: cred.pid(),
                };
                conn::serve(d, stream, peer).await
            }
            Ok(cred) => {
                tracing::warn!(uid = cred.uid(), pid = ?cred.pid(), "refused a peer of another uid");
                let reason = format!(
                    "permission denied: this cubad serves uid {me} only, the peer is uid {}",
                    cred.uid()
                );
                conn::refuse(stream, d.pid, &reason).await;
            }
            Err(e) => tracing::warn!("cannot read peer credentials, connection dropped: {e}"),
        }
    });
}

/// A token for this state directory, created once: it makes process markers unique even
/// between daemons whose ids overlap.
fn instance_id(config: &Config) -> Result<String> {
    let path = config.state_dir.join("instance");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let t = text.trim();
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Ok(t.to_string());
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let token = format!("{:x}{:x}", nanos & 0xffff_ffff_ffff, std::process::id());
    std::fs::write(&path, &token).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(token)
}

async fn prune_expired(d: Arc<Daemon>) {
    let period = (d.config.ttl / 10).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        d.prune(d.config.ttl);
    }
}

/// Stops every running process gracefully (TERM, grace, KILL) and waits for them, bounded.
async fn stop_all(d: &Daemon) {
    let running = d.running();
    for p in &running {
        let control = {
            let mut data = p.lock();
            data.stop.get_or_insert(StopCause::Shutdown);
            data.control.clone()
        };
        if let Some(c) = control {
            let _ = c
                .send(Control::Signal {
                    id: p.id,
                    signal: Signal::Term,
                    grace: Some(d.config.grace),
                })
                .await;
        }
    }
    let deadline = Instant::now() + d.config.grace + Duration::from_secs(2);
    for p in &running {
        let mut changes = p.subscribe();
        loop {
            changes.borrow_and_update();
            let done = {
                let data = p.lock();
                data.finished() && data.drained
            };
            if done {
                break;
            }
            if !matches!(timeout_at(deadline, changes.changed()).await, Ok(Ok(()))) {
                // Out of time: make sure nothing of the tree survives us.
                let root = p.lock().root.clone();
                if let Some(root) = root {
                    tree::kill_tree(&root, Some(&d.scope()));
                }
                break;
            }
        }
    }
}
