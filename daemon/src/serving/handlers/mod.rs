//! Request handlers, one file per request (two for `Spawn`/`Ensure`, which share one path).
//! Single-answer handlers return a `Response`; streaming ones (follow, watch, run, events) send frames
//! through the [`Responder`] and end with their last.

mod asks;
mod bearer;
mod events;
mod follow;
mod info;
mod list;
mod matcher;
mod notify;
mod person;
mod policy_check;
mod prune;
mod read;
mod resize;
mod run;
mod screen;
#[cfg(unix)]
mod setuid;
mod shutdown;
mod signal;
mod spawn;
mod status;
mod stdin;
mod upgrade;
pub mod validate;
mod wait;
mod watch;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use cuba_protocol::{ErrorKind, ErrorReason, ProtocolError, Request, Response, ResponseFrame};
use futures_util::FutureExt;
use tokio::sync::mpsc;

use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

/// Sends the frames of one request's reply.
#[derive(Clone)]
pub struct Responder {
    pub id: u64,
    pub tx: mpsc::Sender<ResponseFrame>,
}

impl Responder {
    /// False once the connection is gone: the handler should stop.
    pub async fn send(&self, response: Response) -> bool {
        self.tx
            .send(ResponseFrame {
                id: self.id,
                response,
            })
            .await
            .is_ok()
    }
}

/// Runs one request of `caller` to completion, sending its reply. A handler that fails (a
/// panic: a bug) still gets its request an answer, and the daemon goes on serving.
pub async fn dispatch(d: Arc<Daemon>, caller: Arc<Caller>, request: Request, out: Responder) {
    let (id, tx) = (out.id, out.tx.clone());
    let handled = AssertUnwindSafe(handle(d, caller, request, out)).catch_unwind();
    if handled.await.is_err() {
        tracing::error!(id, "a request handler failed");
        let msg = "the request failed inside cubad (see its log); the daemon goes on".to_string();
        let error = Response::Error(ProtocolError::new(ErrorKind::Internal, msg));
        let _ = tx
            .send(ResponseFrame {
                id,
                response: error,
            })
            .await;
    }
}

async fn handle(d: Arc<Daemon>, caller: Arc<Caller>, request: Request, out: Responder) {
    if let Err(e) = reachable(&d, &caller, &request) {
        out.send(Response::Error(e)).await;
        return;
    }
    attended(&d, &caller, &request);
    let result = match request {
        Request::Spawn(r) => spawn::spawn(&d, &caller, r).await.map(Response::Process),
        Request::Ensure(r) => {
            let ensured = spawn::ensure(&d, &caller, r).await;
            ensured.map(|(p, existing)| match existing {
                true => Response::Existing(p),
                false => Response::Process(p),
            })
        }
        Request::Run(r) => run::run(&d, &caller, r, &out).await,
        Request::Info(r) => info::info(&d, r.id),
        Request::Read(r) => read::read(&d, r),
        Request::Stdin(r) => stdin::stdin(&d, r).await,
        Request::Wait(r) => {
            let inside = caller.tree() == Some(r.id);
            wait::wait(&d, r, inside).await
        }
        Request::Signal(r) => signal::signal(&d, &caller, r).await,
        Request::List(r) => Ok(Response::List(list::list(&d, &caller, &r))),
        Request::WatchTable(r) => watch::watch(&d, &caller, r, &out).await,
        Request::Follow(r) => {
            let inside = caller.tree() == Some(r.id);
            follow::follow(&d, r, &out, inside).await
        }
        Request::Prune => Ok(prune::prune(&d, &caller).await),
        Request::PolicyCheck(text) => Ok(policy_check::policy_check(&d, &caller, &text)),
        Request::DaemonStatus => Ok(Response::DaemonStatus(status::status(&d))),
        Request::Resize(r) => resize::resize(&d, r).await,
        Request::Screen(r) => screen::screen(&d, r.id),
        Request::Shutdown(r) => return shutdown::shutdown(&d, &caller, r, &out).await,
        Request::Upgrade(r) => return upgrade::upgrade(&d, &caller, r, &out).await,
        Request::Approve(r) => asks::approve(&d, &caller, r).await,
        Request::Deny(r) => asks::deny(&d, &caller, r).await,
        Request::Approvals => Ok(asks::approvals(&d, &caller)),
        Request::Forget(r) => asks::forget(&d, &caller, r),
        Request::AskSecret(r) => asks::ask_secret(&d, &caller, r).await,
        Request::AnswerSecret(r) => asks::answer_secret(&d, &caller, r),
        Request::Reload => person::reload(&d, &caller),
        Request::TokenCreate(r) => bearer::create(&d, &caller, r),
        Request::TokenRevoke(name) => bearer::revoke(&d, &caller, &name),
        Request::TokenList => Ok(bearer::list(&d)),
        Request::TokenCheck(hash) => Ok(bearer::check(&d, &hash)),
        Request::HttpStop(pid) => person::http_stop(&d, &caller, pid),
        Request::Authorize(verb) => person::authorize(&d, &caller, verb),
        Request::Events(r) => events::events(&d, &caller, r, &out).await,
        Request::Notify(r) => notify::notify(&d, &caller, r),
        // The connection handles cancels itself; one that gets here had nothing to cancel.
        Request::Cancel(_) => Ok(Response::Ok),
    };
    out.send(result.unwrap_or_else(Response::Error)).await;
}

/// A client looks at (`status`, `info`), reads, waits on, follows, writes to or looks at the
/// screen of a process: the clock of `unwatched_timeout` starts again. Not when the caller
/// runs inside that process's own tree: a command cannot keep itself alive by reading its own
/// output.
fn attended(d: &Daemon, caller: &Caller, request: &Request) {
    let id = match request {
        Request::Info(r) => r.id,
        Request::Read(r) => r.id,
        Request::Wait(r) => r.id,
        Request::Follow(r) => r.id,
        Request::Stdin(r) => r.id,
        Request::Screen(r) => r.id,
        _ => return,
    };
    if caller.tree() == Some(id) {
        return;
    }
    if let Ok(p) = d.table().get(id) {
        p.seen();
    }
}

/// Refuses a request about a process `caller` does not reach, as if there were no such
/// process (a confined caller is not told what others run); and input, signals and resizes of
/// one it reaches but could not have started (`Caller::may_act_on`), audited.
fn reachable(d: &Daemon, caller: &Caller, request: &Request) -> Result<(), ProtocolError> {
    let (id, act) = match request {
        Request::Info(r) => (r.id, None),
        Request::Read(r) => (r.id, None),
        Request::Wait(r) => (r.id, None),
        Request::Follow(r) => (r.id, None),
        Request::Screen(r) => (r.id, None),
        Request::Notify(r) => (r.id, None),
        Request::Stdin(r) => (r.id, Some(("send_input", "send input to"))),
        Request::Signal(r) => (r.id, Some(("send_signal", "signal"))),
        Request::Resize(r) => (r.id, Some(("resize", "resize the terminal of"))),
        _ => return Ok(()),
    };
    let p = d.table().get(id)?;
    let rec = p.lock();
    if !caller.reaches(&rec) {
        return Err(crate::state::table::not_found(id));
    }
    let Some((verb, what)) = act else {
        return Ok(());
    };
    let verdict = caller.may_act_on(&rec, what);
    drop(rec);
    if let Err(e) = &verdict {
        let refused = Some(("act_as_started", e.message.as_str()));
        d.table().audit().control(caller.who(), verb, refused);
    }
    verdict
}

/// A person's verb: refused on a connection from inside one of the daemon's process trees
/// (`what` says what only a person does), and audited either way as `verb`.
fn person(d: &Daemon, caller: &Caller, verb: &str, what: &str) -> Result<(), ProtocolError> {
    let verdict = caller.must_be_a_person(what);
    let refused = verdict
        .as_ref()
        .err()
        .map(|e| ("person_only", e.message.as_str()));
    d.table().audit().control(caller.who(), verb, refused);
    verdict
}

/// The refusal of a terminal request for a process on pipes.
fn not_a_tty(id: u64) -> ProtocolError {
    ProtocolError::invalid_state(format!(
        "process {id} has no terminal: start it with tty to get one"
    ))
    .because(ErrorReason::NoTerminal)
}
