//! Commands no one attends to (`base::config::agents`): when the MCP client that started one
//! has gone, it is kept, asked about, or stopped after a grace (`client_gone`); and one nobody
//! has read, waited on, followed or written to for `unwatched_timeout` is stopped. Someone
//! following it (`tail -f`, `attach`, a `wait`) puts either stop off. Each stop is an event,
//! a reason on the row (`error`) and in the audit's `end` line.

use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::{AskKind, Signal};
use tokio::time::Instant;

use super::Supervisor;
use crate::base::config::{AgentRules, OnGone};
use crate::state::asks::{Answer, Asks, Question};
use crate::state::record::{Control, StopCause};

pub struct Leftover {
    rules: AgentRules,
    /// Who started it, for the words of the notice and the question.
    client: String,
    asks: Arc<Asks>,
    /// When the stop of a gone client's command is due (`client_gone = "stop"`).
    pub(super) gone_at: Option<Instant>,
    gone_since: Option<Instant>,
    /// When to look again whether it has been attended to (`unwatched_timeout`).
    pub(super) unwatched_at: Option<Instant>,
    started: Instant,
}

impl Leftover {
    /// A session's shell is never stopped for want of attention (its commands are what is
    /// read); it still follows `client_gone`.
    pub fn new(rules: AgentRules, client: &str, asks: Arc<Asks>, session: bool) -> Leftover {
        let started = Instant::now();
        Leftover {
            rules,
            client: client.to_string(),
            asks,
            gone_at: None,
            gone_since: None,
            unwatched_at: rules.unwatched.filter(|_| !session).map(|d| started + d),
            started,
        }
    }

    /// Whether its client's exit must be watched for it.
    pub fn watches_client(&self) -> bool {
        self.rules.client_gone != OnGone::Keep
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Supervisor<'_> {
    /// Its MCP client has gone: the stop is due after the grace, or the person is asked.
    pub(super) fn leftover_client_gone(&mut self) {
        let Some(l) = self.leftover.as_mut() else {
            return;
        };
        let now = Instant::now();
        l.gone_since = Some(now);
        let (rules, client) = (l.rules, l.client.clone());
        match rules.client_gone {
            OnGone::Keep => {}
            OnGone::Stop => {
                l.gone_at = Some(now + rules.client_gone_grace);
                let at = crate::base::config::shown_duration(rules.client_gone_grace);
                self.p.lock().set_notice(Some(format!(
                    "its MCP client {client} has gone: stopped in {at} unless someone follows \
                     it (client_gone = \"stop\")"
                )));
                self.table.changed();
            }
            OnGone::Ask => self.ask_client_gone(&client),
        }
    }

    /// `client_gone = "ask"`: one question; approved, the command is stopped through its own
    /// control channel; denied or unanswered, it runs on.
    fn ask_client_gone(&mut self, client: &str) {
        let Some(l) = self.leftover.as_ref() else {
            return;
        };
        let (pid, cwd, control) = {
            let rec = self.p.lock();
            let info = rec.info();
            (info.pid, info.cwd.clone(), rec.control.clone())
        };
        let question = Question {
            kind: AskKind::ClientGone,
            what: format!("its MCP client {client} has gone; stop it?"),
            rule: "client_gone = \"ask\"".into(),
            pid,
            cwd,
        };
        self.p.lock().set_notice(Some(format!(
            "its MCP client {client} has gone: `cubactl approve {}` stops it, `cubactl deny` \
             keeps it (client_gone = \"ask\")",
            self.p.id
        )));
        self.table.changed();
        let rx = match l.asks.ask(self.p.proc(), question) {
            Ok(rx) => rx,
            Err(e) => {
                tracing::warn!(
                    id = self.p.id,
                    "cannot ask about a gone client: {}",
                    e.message
                );
                return;
            }
        };
        let (id, grace) = (self.p.id, self.grace);
        tokio::spawn(async move {
            if let (Ok(Answer::Approved), Some(control)) = (rx.await, control) {
                let stop = Some(StopCause::ClientGone { after_ms: 0 });
                let signal = Control::Signal {
                    id,
                    signal: Signal::Term,
                    grace: Some(grace),
                    stop,
                };
                let _ = control.send(signal).await;
            }
        });
    }

    /// The grace after its client went is over: stopped unless someone follows it.
    pub(super) fn leftover_gone_due(&mut self) {
        let Some(l) = self.leftover.as_mut() else {
            return;
        };
        l.gone_at = None;
        let grace = l.rules.client_gone_grace;
        if self.p.followers() > 0 {
            if let Some(l) = self.leftover.as_mut() {
                l.gone_at = Some(Instant::now() + grace);
            }
            return;
        }
        let after = l.gone_since.map_or(grace, |s| s.elapsed());
        let detail = format!(
            "its MCP client had gone {} before, with nobody following it: stopped",
            crate::base::config::shown_duration(after)
        );
        self.leftover_stop(
            StopCause::ClientGone {
                after_ms: ms(after),
            },
            "client_gone",
            detail,
        );
    }

    /// Time to look whether anyone attended to it lately: stopped if not, else looked at again
    /// when the timeout would next be up.
    pub(super) fn leftover_unwatched_due(&mut self) {
        let Some(l) = self.leftover.as_mut() else {
            return;
        };
        l.unwatched_at = None;
        let Some(after) = l.rules.unwatched else {
            return;
        };
        let last = self
            .p
            .last_seen()
            .map(Instant::from_std)
            .map_or(l.started, |s| s.max(l.started));
        let now = Instant::now();
        if self.p.followers() > 0 || last + after > now {
            let next = match self.p.followers() > 0 {
                true => now + after,
                false => last + after,
            };
            l.unwatched_at = Some(next);
            return;
        }
        let detail = format!(
            "nobody had read, waited on or followed it for {}: stopped",
            crate::base::config::shown_duration(after)
        );
        let cause = StopCause::Unwatched {
            after_ms: ms(after),
        };
        self.leftover_stop(cause, "unwatched_timeout", detail);
    }

    fn leftover_stop(&mut self, cause: StopCause, limit: &str, detail: String) {
        tracing::info!(id = self.p.id, "{detail}");
        self.report_limit(self.p, limit, detail);
        self.mark_stopped(cause);
        let grace = Some(self.grace);
        self.signal(Signal::Term, grace);
    }
}
