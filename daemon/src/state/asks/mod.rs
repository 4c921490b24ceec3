//! Questions put to the person, and their answers: a command or an exec the policy says to
//! `ask` about (held in `awaiting_approval`), and a password a program asks for through the
//! askpass helper. Every human channel is asked at once (the MCP client by elicitation,
//! `cubactl approve`/`deny`/`answer`, a desktop notification); the first answer wins, and
//! nobody answering within `approval_timeout` is a no. Only a person answers: the handlers
//! refuse answers from inside any process tree the daemon started.
//!
//! Each ask is shown on its record (`ProcessInfo::asks`) while it waits, and is an audit line
//! and an event of the log when asked and when answered; the desktop notification
//! (`notify.rs`) is a reader of that log. Remembered approvals (`store.rs`) are asked about no
//! more.

mod notify;
mod store;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cuba_protocol::{
    now_ms, Ask, AskKind, ErrorKind, EventKind, Pending, ProcState, ProtocolError, Remembered,
};
use tokio::sync::oneshot;

use crate::base::config::Notify;
pub use crate::state::audit::Who;
use crate::state::record::{Note, Proc};
use crate::state::table::Table;

use store::Store;

/// Questions waiting at once, in the whole daemon: a tree that asks without end is refused
/// past it rather than growing the table.
const MAX_PENDING: usize = 256;

/// What a person answered.
#[derive(Debug)]
pub enum Answer {
    Approved,
    Denied(String),
    Secret(Vec<u8>),
    /// Nobody answered: the command it was about was stopped on request, why as said.
    Stopped(String),
}

struct Entry {
    process: Arc<Proc>,
    ask: Ask,
    reply: oneshot::Sender<Answer>,
}

/// The broker: every pending question, the remembered approvals, and how to tell the person.
pub struct Asks {
    pending: Mutex<BTreeMap<u64, Entry>>,
    next: AtomicU64,
    store: Store,
    timeout: Duration,
    notify: Notify,
    table: Arc<Table>,
    /// The daemon's runtime: the exec checks' thread asks from outside it.
    runtime: tokio::runtime::Handle,
}

/// What a person is asked.
pub struct Question {
    pub kind: AskKind,
    pub what: String,
    pub rule: String,
    pub pid: u32,
    pub cwd: String,
}

impl Asks {
    pub fn new(
        table: Arc<Table>,
        approvals: PathBuf,
        timeout: Duration,
        notify: Notify,
        runtime: tokio::runtime::Handle,
    ) -> Arc<Asks> {
        let asks = Arc::new(Asks {
            pending: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(1),
            store: Store::new(approvals),
            timeout,
            notify,
            table,
            runtime,
        });
        notify::start(&asks);
        asks
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The remembered approval of `rule` that holds in `cwd`.
    pub fn remembered(&self, rule: &str, cwd: &Path) -> Option<Remembered> {
        self.store.find(rule, cwd)
    }

    /// Puts question `q` about process `p` to the person: shown on its record (state
    /// `awaiting_approval`, or `waiting_input` for a password), an audit line, a desktop
    /// notification, and denied after `approval_timeout`. The answer comes on the receiver;
    /// one that closes unanswered means the process ended.
    pub fn ask(
        self: &Arc<Self>,
        p: &Arc<Proc>,
        q: Question,
    ) -> Result<oneshot::Receiver<Answer>, ProtocolError> {
        let mut pending = self.lock();
        pending.retain(|_, e| !e.process.lock().finished());
        if pending.len() >= MAX_PENDING {
            drop(pending);
            let limit = "pending_asks".to_string();
            let detail = format!("refused a question: {MAX_PENDING} wait already");
            self.table.event(p, EventKind::LimitHit { limit, detail });
            return Err(ProtocolError::new(
                ErrorKind::Limit,
                format!(
                    "{MAX_PENDING} questions already wait for the user; answer or deny some \
                     (`cubactl approvals`)"
                ),
            ));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let at = now_ms();
        let ask = Ask {
            id,
            kind: q.kind,
            what: q.what,
            rule: q.rule,
            pid: q.pid,
            cwd: q.cwd,
            asked_at_ms: at,
            deadline_ms: at + self.timeout.as_millis() as u64,
        };
        let (tx, rx) = oneshot::channel();
        // The row as it is once the record has the question (its writer applies the note).
        let mut info = p.lock().snapshot();
        info.asks.push(ask.clone());
        info.state = match ask.kind {
            AskKind::Password => ProcState::WaitingInput,
            _ => ProcState::AwaitingApproval,
        };
        p.note(Note::Asked(ask.clone()));
        pending.insert(
            id,
            Entry {
                process: p.clone(),
                ask: ask.clone(),
                reply: tx,
            },
        );
        drop(pending);
        self.table.audit().asked(&info, &ask);
        let (kind, what) = (ask.kind, ask.what.clone());
        self.table.event(
            p,
            EventKind::AskRaised {
                ask: id,
                kind,
                what,
            },
        );
        self.table.changed();
        let (me, timeout) = (self.clone(), self.timeout);
        let process = p.clone();
        self.runtime.spawn(async move {
            let mut changes = process.subscribe();
            let ended = async {
                while !process.lock().finished() {
                    if changes.changed().await.is_err() {
                        return;
                    }
                }
            };
            tokio::select! {
                () = tokio::time::sleep(timeout) => {
                    let why = format!(
                        "nobody answered within {} (approval_timeout)",
                        crate::base::config::shown_duration(timeout)
                    );
                    let who = Who { by: "nobody".into(), channel: "approval_timeout".into() };
                    let _ = me.settle(id, Answer::Denied(why), &who, "timed_out");
                }
                () = ended => { me.drop_ask(id); }
            }
        });
        Ok(rx)
    }

    /// Answers ask `id` (approval, denial or password), as `decision` for the audit.
    fn settle(&self, id: u64, answer: Answer, who: &Who, decision: &str) -> Result<(), String> {
        let Some(entry) = self.lock().remove(&id) else {
            return Err(format!("ask {id} was answered already"));
        };
        entry.process.note(Note::Settled(id));
        let info = entry.process.lock().snapshot();
        let reason = match &answer {
            Answer::Denied(why) | Answer::Stopped(why) => Some(why.as_str()),
            _ => None,
        };
        self.table
            .audit()
            .answered(&info, &entry.ask, decision, (&who.by, &who.channel, reason));
        let approved = matches!(answer, Answer::Approved | Answer::Secret(_));
        let by = who.by.clone();
        let answered = EventKind::AskAnswered {
            ask: id,
            approved,
            by,
        };
        self.table.event(&entry.process, answered);
        let _ = entry.reply.send(answer);
        self.table.changed();
        Ok(())
    }

    /// Forgets ask `id` unanswered (its process ended).
    fn drop_ask(&self, id: u64) {
        if let Some(entry) = self.lock().remove(&id) {
            entry.process.note(Note::Settled(id));
        }
    }

    /// The pending ask of process `process` that `ask` names (or its only one), of a kind
    /// `fits` accepts.
    fn find(
        &self,
        process: u64,
        ask: Option<u64>,
        fits: impl Fn(AskKind) -> bool,
        what: &str,
    ) -> Result<Ask, ProtocolError> {
        let pending = self.lock();
        let mine: Vec<&Ask> = pending
            .values()
            .filter(|e| e.process.id == process && fits(e.ask.kind))
            .map(|e| &e.ask)
            .collect();
        let found = match ask {
            Some(a) => mine.iter().find(|x| x.id == a).copied(),
            None if mine.len() == 1 => mine.first().copied(),
            None if mine.len() > 1 => {
                let ids: Vec<String> = mine.iter().map(|a| a.id.to_string()).collect();
                return Err(ProtocolError::bad_request(format!(
                    "process {process} has {} questions waiting (asks {}): name one with --ask",
                    mine.len(),
                    ids.join(", ")
                )));
            }
            None => None,
        };
        found.cloned().ok_or_else(|| {
            ProtocolError::new(
                ErrorKind::InvalidState,
                format!("process {process} has no {what} waiting for an answer"),
            )
        })
    }

    /// A person approves; `always`: remembered for `dir` (default: the ask's cwd).
    pub fn approve(
        &self,
        process: u64,
        ask: Option<u64>,
        always: Option<Option<String>>,
        who: &Who,
    ) -> Result<(), ProtocolError> {
        let a = self.find(process, ask, |k| k != AskKind::Password, "approval")?;
        let decision = match &always {
            Some(dir) => {
                let dir = dir.clone().unwrap_or_else(|| a.cwd.clone());
                let r = Remembered {
                    rule: a.rule.clone(),
                    dir: Some(dir),
                    by: who.by.clone(),
                    channel: who.channel.clone(),
                    at_ms: now_ms(),
                };
                self.store.remember(r)?;
                "approved_always"
            }
            None => "approved",
        };
        self.settle(a.id, Answer::Approved, who, decision)
            .map_err(ProtocolError::invalid_state)
    }

    /// A person denies an approval (or refuses to give a password), with `reason`.
    pub fn deny(
        &self,
        process: u64,
        ask: Option<u64>,
        reason: String,
        who: &Who,
    ) -> Result<(), ProtocolError> {
        let a = self.find(process, ask, |_| true, "question")?;
        self.settle(a.id, Answer::Denied(reason), who, "denied")
            .map_err(ProtocolError::invalid_state)
    }

    /// A command held for approval is stopped on request (a signal that ends it): its
    /// question is withdrawn, and the holder ends it unstarted. False if none was pending.
    pub fn withdraw(&self, process: u64, why: String, who: &Who) -> bool {
        let held = self.find(process, None, |k| k == AskKind::Command, "command");
        let Ok(a) = held else {
            return false;
        };
        self.settle(a.id, Answer::Stopped(why), who, "stopped")
            .is_ok()
    }

    /// A person gives the password a program asked for.
    pub fn give(
        &self,
        process: u64,
        ask: Option<u64>,
        secret: Vec<u8>,
        who: &Who,
    ) -> Result<(), ProtocolError> {
        let a = self.find(
            process,
            ask,
            |k| k == AskKind::Password,
            "password question",
        )?;
        self.settle(a.id, Answer::Secret(secret), who, "answered")
            .map_err(ProtocolError::invalid_state)
    }

    /// Every pending ask, oldest first.
    pub fn pending(&self) -> Vec<Pending> {
        let mut pending = self.lock();
        pending.retain(|_, e| !e.process.lock().finished());
        pending
            .values()
            .map(|e| {
                let rec = e.process.lock();
                Pending {
                    id: e.process.id,
                    owner: rec.info().owner.name.clone(),
                    command: rec.info().command.clone(),
                    ask: e.ask.clone(),
                }
            })
            .collect()
    }

    /// Every remembered approval, and the file they live in.
    pub fn remembered_all(&self) -> (Vec<Remembered>, String) {
        (self.store.all(), self.store.path().display().to_string())
    }

    /// How the approvals file differs from the approvals in effect (edited by hand since).
    pub fn unconfirmed(&self) -> Vec<String> {
        self.store.unconfirmed()
    }

    /// Puts a hand edit of the approvals file in effect (a person confirmed it); what changed.
    pub fn reload(&self) -> Vec<String> {
        self.store.reload()
    }

    pub fn forget(&self, which: &cuba_protocol::ForgetRequest) -> Result<usize, ProtocolError> {
        self.store.forget(which)
    }

    /// The runtime asks are answered in (for a caller outside it: the exec checks' thread).
    #[cfg(target_os = "linux")]
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }
}
