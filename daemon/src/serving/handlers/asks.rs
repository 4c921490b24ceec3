//! The person's part: `Approve`, `Deny` and `AnswerSecret` (refused from inside any process tree
//! the daemon started: only a person answers), `Approvals` and `Forget` (the pending asks and
//! the remembered approvals), and `AskSecret` (from the askpass helper in a process's tree, run
//! by a genuine sudo, ssh or git: put the password question to the person and answer with what
//! they give).

use std::time::Duration;

use cuba_protocol::{
    Approvals, ApproveRequest, AskKind, DenyRequest, ErrorKind, ForgetRequest, ProcState,
    ProcessInfo, ProtocolError, Response, Secret, SecretAnswer, SecretAsk,
};

use crate::serving::daemon::Daemon;
use crate::state::asks::{Answer, Question};
use crate::state::caller::Caller;
use crate::state::genuine::{escaped, shortened};
use crate::state::record::Proc;

/// Longest password prompt kept (a program's prompt is a line).
const MAX_PROMPT: usize = 512;

/// How long an answer's reply waits for the process to move on (a held command to start or
/// end denied) so that it shows the outcome.
const MOVE_ON: Duration = Duration::from_secs(5);

pub async fn approve(
    d: &Daemon,
    caller: &Caller,
    r: ApproveRequest,
) -> Result<Response, ProtocolError> {
    caller.must_be_a_person("approve a command")?;
    let p = d.table().get(r.id)?;
    let always = r.always.then_some(r.dir);
    d.asks().approve(r.id, r.ask, always, &caller.answerer())?;
    Ok(Response::Process(moved_on(&p).await))
}

/// The process once an answer has taken effect: a command held before it started is launched
/// (or ended) by its spawn's task, so its state changes a moment after the answer; the reply
/// and a wait right after it must not see it still held.
async fn moved_on(p: &Proc) -> ProcessInfo {
    let mut changes = p.subscribe();
    let settled = async {
        loop {
            changes.borrow_and_update();
            {
                let data = p.lock();
                let asked = data.info().asks.iter().any(|a| a.kind.holds());
                if data.info().state != ProcState::AwaitingApproval || asked {
                    return;
                }
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(MOVE_ON, settled).await;
    p.info()
}

pub async fn deny(d: &Daemon, caller: &Caller, r: DenyRequest) -> Result<Response, ProtocolError> {
    caller.must_be_a_person("deny a command")?;
    let who = caller.answerer();
    let reason = match r.reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
        Some(why) => format!("denied by {} through {}: {why}", who.by, who.channel),
        None => format!("denied by {} through {}", who.by, who.channel),
    };
    let p = d.table().get(r.id)?;
    d.asks().deny(r.id, r.ask, reason, &who)?;
    Ok(Response::Process(moved_on(&p).await))
}

/// A confined caller sees the asks of its own processes only.
pub fn approvals(d: &Daemon, caller: &Caller) -> Response {
    let (remembered, file) = d.asks().remembered_all();
    let mut pending = d.asks().pending();
    if caller.tenant.is_some() {
        let table = d.table();
        pending.retain(|a| table.get(a.id).is_ok_and(|p| caller.reaches(&p.lock())));
    }
    Response::Approvals(Approvals {
        pending,
        remembered,
        file,
        unconfirmed: d.asks().unconfirmed(),
    })
}

pub fn forget(d: &Daemon, caller: &Caller, r: ForgetRequest) -> Result<Response, ProtocolError> {
    caller.must_be_a_person("forget an approval")?;
    d.asks().forget(&r)?;
    Ok(approvals(d, caller))
}

pub fn answer_secret(
    d: &Daemon,
    caller: &Caller,
    r: SecretAnswer,
) -> Result<Response, ProtocolError> {
    caller.must_be_a_person("answer a password question")?;
    let who = caller.answerer();
    match r.secret {
        Some(secret) => d.asks().give(r.id, r.ask, secret, &who)?,
        None => {
            let why = format!("{} through {} gave no password", who.by, who.channel);
            d.asks().deny(r.id, r.ask, why, &who)?;
        }
    }
    Ok(Response::Ok)
}

/// From the askpass helper: the process it runs in is found by where the connection comes
/// from (the helper inherits its tree's marker). The helper (judged when it connected) and the
/// program that ran it must be the genuine ones (`genuine.rs`), else the helper is refused at
/// once and nobody is asked; otherwise the person is asked, and the answer (or why there is
/// none) goes back to the helper.
pub async fn ask_secret(
    d: &Daemon,
    caller: &Caller,
    r: SecretAsk,
) -> Result<Response, ProtocolError> {
    let Some(id) = caller.tree() else {
        return Err(ProtocolError::new(
            ErrorKind::BadRequest,
            "a password is asked for only from inside a process cuba-exec started (the \
             askpass helper it gives them)",
        ));
    };
    let p = d.table().get(id)?;
    let helper = caller.peer.pid.unwrap_or(0);
    let asker = match d.genuine().check(helper, &caller.helper) {
        Ok(asker) => asker,
        Err(no) => {
            tracing::warn!(
                id,
                pid = no.pid,
                program = %no.program,
                "password ask refused: {}",
                no.why
            );
            let pid = u32::try_from(no.pid).unwrap_or(0);
            d.table()
                .audit()
                .askpass_refused(&p.info(), pid, &no.program, &no.why);
            return Ok(Response::Secret(Secret::Refused(no.why)));
        }
    };
    let prompt = shortened(&escaped(r.prompt.trim(), true), MAX_PROMPT);
    let cwd = p.lock().info().cwd.clone();
    let q = Question {
        kind: AskKind::Password,
        what: if prompt.is_empty() {
            "Password:".into()
        } else {
            prompt
        },
        rule: asker.shown,
        pid: u32::try_from(asker.pid).unwrap_or(0),
        cwd,
    };
    let rx = d.asks().ask(&p, q)?;
    Ok(Response::Secret(match rx.await {
        Ok(Answer::Secret(s)) => Secret::Given(s),
        Ok(Answer::Denied(why) | Answer::Stopped(why)) => Secret::Refused(why),
        Ok(Answer::Approved) => Secret::Refused("no password was given".into()),
        Err(_) => Secret::Refused("the process ended".into()),
    }))
}
