//! The requests, on Windows. Each answers as its Unix handler does (same replies, same
//! errors); what the Windows daemon does not offer yet is refused with a message naming it.

use std::sync::mpsc::TrySendError;
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::{
    ErrorKind, ErrorReason, ListRequest, Listing, ProtocolError, Request, Response, RunRequest,
    Signal, SignalRequest, SpawnRequest, StdinRequest, WaitRequest,
};

use super::client::{Client, Responder};
use super::stop::{ended, stop};
use super::table::{Rec, Stop};
use super::{launch, status, wait, Daemon};
use crate::platform::win_signal;

/// Slack beyond the grace period for a `wait`ing signal request and for the shutdown.
const WAIT_MARGIN: Duration = Duration::from_secs(3);
/// Largest output frame sent while following.
const STEP: u64 = 256 * 1024;
/// How long a run's record waits for the run's end before it is sent alone (as on Unix).
const HOLD: Duration = Duration::from_millis(5);

pub async fn handle(d: &Arc<Daemon>, client: &Client, request: Request, out: Responder) {
    let result = match request {
        Request::Spawn(r) => spawn(d, client, r).map(Response::Process),
        Request::Ensure(r) => ensure(d, client, r),
        Request::Run(r) => run(d, client, r, &out).await,
        Request::Info(r) => d.table.get(r.id).map(|p| Response::Process(p.info())),
        Request::Read(r) => d.table.get(r.id).map(|p| {
            let max = r.max_bytes.min(cuba_protocol::wire::MAX_OUTPUT_PER_FRAME);
            Response::Output(p.lock().output.read(r.since, u64::from(max), r.stream))
        }),
        Request::Wait(r) => match d.table.get(r.id) {
            Ok(p) => wait::wait(&p, r).await,
            Err(e) => Err(e),
        },
        Request::Stdin(r) => stdin(d, r),
        Request::Signal(r) => signal(d, r).await,
        Request::List(r) => Ok(Response::List(list(d, &r))),
        Request::Follow(r) => follow(d, r, &out).await,
        Request::Prune => Ok(Response::Pruned(prune(d, true))),
        Request::PolicyCheck(text) => Ok(Response::Policy(status::policy_check(d, client, &text))),
        Request::DaemonStatus => Ok(Response::DaemonStatus(status::status(d))),
        Request::Shutdown(r) => {
            let running = d.table.running();
            if running > 0 && !r.force {
                Err(ProtocolError::invalid_state(format!(
                    "{running} process(es) still running; stop them first, or force the \
                     shutdown (their trees are then ended)"
                )))
            } else {
                out.send(Response::Ok).await;
                d.stop.send_replace(true);
                return;
            }
        }
        Request::Cancel(_) => Ok(Response::Ok),
        // No connection can be told to come from a command's tree here yet: the client's
        // own verb goes ahead as before.
        Request::Authorize(_) => Ok(Response::Ok),
        Request::Resize(r) => resize(d, r),
        Request::Screen(r) => d.table.get(r.id).and_then(|p| {
            let data = p.lock();
            let screen = data.screen.as_ref().ok_or_else(|| not_a_tty(r.id))?;
            Ok(Response::Screen(screen.view(data.output.total())))
        }),
        other => Err(ProtocolError::unsupported(name(&other), " yet")),
    };
    out.send(result.unwrap_or_else(Response::Error)).await;
}

/// A request's name, for a refusal.
fn name(r: &Request) -> &'static str {
    match r {
        Request::WatchTable(_) => "a live table (watch)",
        Request::Upgrade(_) => "in-place upgrades",
        Request::Approve(_) | Request::Deny(_) | Request::Approvals | Request::Forget(_) => {
            "approvals (ask rules)"
        }
        Request::AskSecret(_) | Request::AnswerSecret(_) => "password asks",
        Request::TokenCreate(_)
        | Request::TokenRevoke(_)
        | Request::TokenList
        | Request::TokenCheck(_)
        | Request::HttpStop(_) => "the HTTP endpoint's tokens",
        Request::Reload => "reloading approvals and tokens",
        _ => "this request",
    }
}

fn spawn(
    d: &Arc<Daemon>,
    client: &Client,
    r: SpawnRequest,
) -> Result<cuba_protocol::ProcessInfo, ProtocolError> {
    if d.shutting_down() {
        return Err(ProtocolError::new(
            ErrorKind::ShuttingDown,
            "cubad is shutting down",
        ));
    }
    if let Some(why) = sandbox_refusal(d, client) {
        return Err(ProtocolError::new(ErrorKind::Blocked, why));
    }
    launch::start(d, client, r)
}

/// A sandbox asked for (by the daemon's settings or the client's) cannot be given here: the
/// command is refused rather than run unconfined.
fn sandbox_refusal(d: &Daemon, client: &Client) -> Option<String> {
    let sandbox = &d.config.sandbox;
    let asked = sandbox.workspace_write
        || sandbox.no_network
        || client.policy.write_confined
        || client.policy.no_network;
    asked.then(|| {
        format!(
            "a sandbox was asked for, and {}; the command was not run",
            status::SANDBOX
        )
    })
}

fn ensure(d: &Arc<Daemon>, client: &Client, r: SpawnRequest) -> Result<Response, ProtocolError> {
    if r.name.is_some() {
        let found = d.table.all().into_iter().find(|p| {
            let data = p.lock();
            !data.finished() && data.info.name == r.name && data.info.command == r.command
        });
        if let Some(p) = found {
            return Ok(Response::Existing(p.info()));
        }
    }
    spawn(d, client, r).map(Response::Process)
}

async fn run(
    d: &Arc<Daemon>,
    client: &Client,
    r: RunRequest,
    out: &Responder,
) -> Result<Response, ProtocolError> {
    let info = spawn(d, client, r.spawn)?;
    let p = d.table.get(info.id)?;
    let req = WaitRequest {
        id: info.id,
        since: Some(0),
        spec: r.wait,
    };
    let waited = wait::wait(&p, req);
    tokio::pin!(waited);
    // A command that ends at once gets its record and its result in one write.
    let ended = tokio::select! {
        biased;
        result = &mut waited => Some(result),
        () = tokio::time::sleep(HOLD) => None,
    };
    if !out.send(Response::Process(info)).await {
        return Ok(Response::End);
    }
    match ended {
        Some(result) => result,
        None => waited.await,
    }
}

fn stdin(d: &Daemon, r: StdinRequest) -> Result<Response, ProtocolError> {
    let p = d.table.get(r.id)?;
    let mut data = p.lock();
    let closed = || {
        ProtocolError::invalid_state(format!(
            "cannot write to process {}: its stdin is closed (EOF was sent, or it ended)",
            r.id
        ))
    };
    let tx = data.stdin.clone().ok_or_else(closed)?;
    let send = |msg: Option<Vec<u8>>| match tx.try_send(msg) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => Err(ProtocolError::new(
            ErrorKind::Limit,
            format!(
                "process {} is not reading its stdin and the queue is full; wait for it to \
                 read, or close stdin",
                r.id
            ),
        )),
        Err(TrySendError::Disconnected(_)) => Err(closed()),
    };
    if !r.data.is_empty() {
        send(Some(r.data))?;
    }
    // A terminal is not closed: its end of file is typed, as a person would.
    if r.eof && data.pty.is_some() {
        send(Some(super::tty::EOF.to_vec()))?;
    } else if r.eof {
        send(None)?;
        data.stdin = None;
    }
    data.last_input = std::time::Instant::now();
    data.moved_on();
    drop(data);
    p.notify();
    Ok(Response::Ok)
}

/// The refusal of a terminal request for a process on pipes.
fn not_a_tty(id: u64) -> ProtocolError {
    ProtocolError::invalid_state(format!(
        "process {id} has no terminal: start it with tty to get one"
    ))
    .because(ErrorReason::NoTerminal)
}

fn resize(d: &Daemon, r: cuba_protocol::ResizeRequest) -> Result<Response, ProtocolError> {
    crate::screen::valid_size(r.size).map_err(ProtocolError::bad_request)?;
    let p = d.table.get(r.id)?;
    let mut data = p.lock();
    let pty = data.pty.clone().ok_or_else(|| not_a_tty(r.id))?;
    pty.lock()
        .unwrap_or_else(|e| e.into_inner())
        .resize(r.size.cols, r.size.rows)
        .map_err(|e| {
            ProtocolError::invalid_state(format!("cannot resize process {}: {e}", r.id))
        })?;
    if let Some(screen) = data.screen.as_mut() {
        screen.resize(r.size);
    }
    data.info.tty = Some(r.size);
    Ok(Response::Ok)
}

async fn signal(d: &Arc<Daemon>, r: SignalRequest) -> Result<Response, ProtocolError> {
    let p = d.table.get(r.id)?;
    let state = p.lock().info.state;
    if state.is_finished() {
        return Err(ProtocolError::invalid_state(format!(
            "process {} has already ended ({state})",
            r.id
        )));
    }
    let grace = r.grace_ms.map_or(d.config.grace, Duration::from_millis);
    win_signal::action(r.signal).map_err(ProtocolError::bad_request)?;
    stop(&p, Stop::Request, r.signal, r.escalate.then_some(grace));
    if r.wait {
        ended(&p, grace + WAIT_MARGIN).await;
    }
    Ok(Response::Process(p.info()))
}

fn list(d: &Daemon, r: &ListRequest) -> Listing {
    let keep = |i: &cuba_protocol::ProcessInfo| {
        r.state.is_none_or(|s| i.state == s)
            && r.owner.as_ref().is_none_or(|o| &i.owner.name == o)
            && r.name.as_ref().is_none_or(|n| i.name.as_ref() == Some(n))
    };
    let most = r.finished.map_or(usize::MAX, |n| n as usize);
    let most_running = r.running.map_or(usize::MAX, |n| n as usize);
    let mut listing = Listing::default();
    let (mut finished, mut running) = (0usize, 0usize);
    // Newest first, to choose; shown by id, as every listing is.
    for p in d.table.all().into_iter().rev() {
        let info = p.info();
        if !keep(&info) {
            continue;
        }
        if info.state.is_finished() {
            finished += 1;
            if finished > most {
                listing.hidden += 1;
                continue;
            }
        } else {
            running += 1;
            if running > most_running {
                listing.hidden_running += 1;
                continue;
            }
        }
        listing.processes.push(info);
    }
    listing.processes.reverse();
    listing
}

async fn follow(
    d: &Daemon,
    r: cuba_protocol::FollowRequest,
    out: &Responder,
) -> Result<Response, ProtocolError> {
    let p = d.table.get(r.id)?;
    let mut changes = p.subscribe();
    let mut cursor = r.since.unwrap_or_else(|| {
        let total = p.lock().output.total();
        total.saturating_sub(u64::from(r.backlog))
    });
    loop {
        changes.borrow_and_update();
        let (read, done) = {
            let data = p.lock();
            let read = data.output.read(Some(cursor), STEP, r.stream);
            (read, data.finished() && data.drained)
        };
        if read.next > cursor {
            cursor = read.next;
            if !out.send(Response::Output(read)).await {
                return Ok(Response::End);
            }
            continue;
        }
        if done {
            out.send(Response::Process(p.info())).await;
            return Ok(Response::End);
        }
        if changes.changed().await.is_err() {
            return Ok(Response::End);
        }
    }
}

/// Removes finished records (all of them, or those past their TTL and beyond the most kept)
/// and their spools.
pub fn prune(d: &Daemon, all: bool) -> u64 {
    let gone = d.table.prune(all, d.config.ttl, d.config.max_finished);
    let dirs: Vec<_> = gone.iter().map(|&id| d.state.spool(id)).collect();
    crate::output::Spool::remove_all(&dirs);
    gone.len() as u64
}

/// At shutdown: every tree still running is stopped (Ctrl-Break, the grace period, then its
/// job ended), and waited for.
pub async fn end_all(d: &Arc<Daemon>) {
    let running: Vec<Arc<Rec>> = d
        .table
        .all()
        .into_iter()
        .filter(|p| !p.lock().finished())
        .collect();
    for p in &running {
        stop(p, Stop::Shutdown, Signal::Term, Some(d.config.grace));
    }
    for p in &running {
        ended(p, d.config.grace + WAIT_MARGIN).await;
    }
}
