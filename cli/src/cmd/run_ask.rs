//! `run` and an `ask` decision: a command held for a person's approval is asked about here when
//! this terminal is that person's (stdin and stdout a terminal in the foreground); otherwise,
//! and for an exec held later in the run, the way to answer is printed once per question.

use std::collections::HashSet;
use std::io::{BufRead, Write};

use cuba_protocol::client::Client;
use cuba_protocol::{
    ApproveRequest, AskKind, DenyRequest, ListRequest, ProcState, ProcessInfo, Request, Response,
};

use crate::ctx::Ctx;
use crate::style::Paint;
use crate::term;

/// What `info`'s pending question asks, and how to answer it elsewhere.
pub fn question(info: &ProcessInfo, ask: &cuba_protocol::Ask) -> String {
    let id = info.id;
    match ask.kind {
        AskKind::Password => format!(
            "cubactl: {} asks for a password in process {id}: `cubactl answer {id}` gives it",
            ask.rule
        ),
        AskKind::Command => format!(
            "cubactl: process {id} awaits approval to run `{}` ({}); `cubactl approve {id}` or \
             `cubactl deny {id}` in another terminal",
            ask.what, ask.rule
        ),
        AskKind::Exec => format!(
            "cubactl: process {id} is held at the exec of `{}` ({}); `cubactl approve {id}` or \
             `cubactl deny {id}`",
            ask.what, ask.rule
        ),
        AskKind::Network => format!(
            "cubactl: process {id} wants to reach {} through the proxy ({}); `cubactl approve \
             {id}` or `cubactl deny {id}`",
            ask.what, ask.rule
        ),
        AskKind::ClientGone => format!(
            "cubactl: {}: `cubactl approve {id}` stops process {id}, `cubactl deny {id}` keeps it",
            ask.what
        ),
    }
}

/// Asks the person at this terminal about `info`'s held command (approve once, always, or
/// deny with a reason), or prints how to answer it when nobody can be asked here.
pub async fn at_start(ctx: &Ctx, client: &Client, info: &ProcessInfo) {
    let Some(ask) = info.asks.first() else {
        return;
    };
    let line = question(info, ask);
    eprintln!("{}", ctx.err.paint(Some(Paint::Yellow), &line));
    if info.state != ProcState::AwaitingApproval || !term::interactive() {
        return;
    }
    let id = info.id;
    let answer = tokio::task::spawn_blocking(|| {
        let mut err = std::io::stderr();
        let _ = write!(err, "approve it? [y]es once, [a]lways here, [N]o: ");
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    })
    .await;
    let Ok(Ok(answer)) = answer else { return };
    let answer = answer.trim().to_ascii_lowercase();
    let result = match answer.as_str() {
        "y" | "yes" | "a" | "always" => {
            let always = answer.starts_with('a');
            client
                .approve(ApproveRequest {
                    id,
                    ask: Some(ask.id),
                    always,
                    dir: None,
                })
                .await
                .map(|_| ())
        }
        _ => client
            .deny(DenyRequest {
                id,
                ask: Some(ask.id),
                reason: Some("no, at the terminal that ran it".into()),
            })
            .await
            .map(|_| ()),
    };
    if let Err(e) = result {
        eprintln!("cubactl: {e}");
    }
}

/// While process `id` runs: each question put to the person about it later (an exec held, a
/// password asked for) is told here once, with how to answer it. Woken by the table's changes
/// of the rows in those two states, not by looking again and again.
pub async fn watch_asks(err: crate::style::Style, client: Client, id: u64) {
    let watch = |state| ListRequest {
        state: Some(state),
        ..ListRequest::default()
    };
    let held = client
        .subscribe(Request::WatchTable(watch(ProcState::AwaitingApproval)))
        .await;
    let waiting = client
        .subscribe(Request::WatchTable(watch(ProcState::WaitingInput)))
        .await;
    let (Ok(mut held), Ok(mut waiting)) = (held, waiting) else {
        return;
    };
    let mut told = HashSet::new();
    loop {
        let frame = tokio::select! {
            f = held.next() => f,
            f = waiting.next() => f,
        };
        let Some(Ok(Response::List(listing))) = frame else {
            return;
        };
        let Some(info) = listing.processes.iter().find(|p| p.id == id) else {
            continue;
        };
        for ask in info.asks.iter().filter(|a| told.insert(a.id)) {
            eprintln!("{}", err.paint(Some(Paint::Yellow), &question(info, ask)));
        }
    }
}
