//! `network = "proxy"` in the daemon: each proxied tree's listener (made in its namespace, see
//! `platform::sandbox`) is served by the proxy (`parts::net_proxy`) with a gate that decides
//! by the rules, asks the person about a host no rule names (`unknown = "ask"`, remembered
//! like other approvals), and writes one audit line per connection. The serving ends with the
//! process.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;

use cuba_protocol::{AskKind, ExecBlocked};

use crate::base::config::ProxyRules;
use crate::parts::net_proxy::{self, Decision, Dest, Gate, Rules, Unknown, Verdict, Via};
use crate::processes::supervise::Cleanup;
use crate::state::asks::{Answer, Asks, Question};
use crate::state::record::Note;
use crate::state::table::Table;

/// The proxy's rules and what its gates report to, shared by every proxied tree.
pub struct NetProxy {
    rules: Arc<Rules>,
    table: Arc<Table>,
    asks: Arc<Asks>,
}

/// The settings' rules, checked.
pub fn rules_of(r: &ProxyRules) -> Result<Rules, String> {
    let unknown = match r.unknown.as_str() {
        "" | "deny" => Unknown::Deny,
        "ask" => Unknown::Ask,
        "allow" => Unknown::Allow,
        other => return Err(format!("unknown = {other:?}: expected deny, ask or allow")),
    };
    Rules::new(&r.allow, &r.deny, &r.read_only, unknown)
}

impl NetProxy {
    pub fn new(
        rules: &ProxyRules,
        table: &Arc<Table>,
        asks: &Arc<Asks>,
    ) -> Result<NetProxy, String> {
        Ok(NetProxy {
            rules: Arc::new(rules_of(rules)?),
            table: table.clone(),
            asks: asks.clone(),
        })
    }

    /// Serves the proxy on process `id`'s `listener` until the process has ended: the
    /// returned cleanup stops it.
    pub fn serve(&self, id: u64, listener: OwnedFd) -> std::io::Result<Cleanup> {
        let std_listener = std::net::TcpListener::from(listener);
        std_listener.set_nonblocking(true)?;
        let handle = self.asks.runtime().clone();
        let listener = {
            let _entered = handle.enter();
            tokio::net::TcpListener::from_std(std_listener)?
        };
        let gate: Arc<dyn Gate> = Arc::new(TreeGate {
            id,
            rules: self.rules.clone(),
            table: self.table.clone(),
            asks: self.asks.clone(),
            answered: Arc::default(),
            told: Default::default(),
        });
        let task = handle.spawn(net_proxy::serve(listener, gate));
        Ok(Box::new(move || task.abort()))
    }
}

/// The person's answers for one tree, by rule: `Ok` approved, `Err` denied with why.
type Answered = Arc<tokio::sync::Mutex<HashMap<String, Result<(), String>>>>;

/// One tree's gate.
struct TreeGate {
    id: u64,
    rules: Arc<Rules>,
    table: Arc<Table>,
    asks: Arc<Asks>,
    /// A host is asked about once per tree: a package manager's many connections to its
    /// registry are one question, and a denied host is not asked again by a retry loop.
    answered: Answered,
    /// Destinations whose refusal the process's row already shows.
    told: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Refused destinations noted on one row at most (the row keeps fewer anyway).
const TOLD: usize = 64;

/// `HOST:PORT`, with an IPv6 literal in brackets.
fn dest_text(d: &Dest) -> String {
    match d.host.contains(':') {
        true => format!("[{}]:{}", d.host, d.port),
        false => format!("{}:{}", d.host, d.port),
    }
}

fn via_text(d: &Dest) -> String {
    match (&d.via, &d.method) {
        (Via::Connect, _) => "CONNECT".to_string(),
        (Via::Http, Some(m)) => format!("HTTP {m}"),
        (Via::Http, None) => "HTTP".to_string(),
        (Via::Socks5, _) => "SOCKS5".to_string(),
    }
}

/// The remembered-approval rule of a host: one per host and port.
fn rule_of(d: &Dest) -> String {
    format!("network {}", dest_text(d))
}

impl Gate for TreeGate {
    fn decide(&self, dest: &Dest) -> Pin<Box<dyn std::future::Future<Output = Decision> + Send>> {
        let verdict = self
            .rules
            .decide(&dest.host, dest.port, dest.method.as_deref());
        let decision = match verdict {
            Verdict::Allow { exact } => Decision::Allow { exact },
            Verdict::Deny(why) => Decision::Deny(why),
            Verdict::Ask => {
                let (table, asks) = (self.table.clone(), self.asks.clone());
                return Box::pin(ask((table, asks), self.answered.clone(), self.id, dest));
            }
        };
        Box::pin(std::future::ready(decision))
    }

    fn audit(&self, dest: &Dest, outcome: &str, addr: Option<std::net::SocketAddr>) {
        let Ok(p) = self.table.get(self.id) else {
            return;
        };
        let info = p.lock().snapshot();
        let (decision, reason) = match outcome.split_once(": ") {
            Some((d, r)) => (d, Some(r)),
            None => (outcome, None),
        };
        let addr = addr.map(|a| a.to_string());
        let (dest, via) = (dest_text(dest), via_text(dest));
        self.table
            .audit()
            .network(&info, (&dest, &via, addr.as_deref()), (decision, reason));
        // On the process's row, once per destination: a tool that hides the proxy's answer
        // (pip says only "no matching version") leaves the model this line to read.
        let first = decision == "denied" && {
            let mut told = self.told.lock().unwrap_or_else(|e| e.into_inner());
            told.len() < TOLD && told.insert(dest.clone())
        };
        if first {
            let hint = "allow it in the settings' [proxy] (`cubactl daemon status` shows the \
                        rules), or ask the user";
            p.note(Note::Blocked(ExecBlocked {
                program: dest,
                argv: vec![via],
                rule: "proxy".into(),
                message: format!("{}; {hint}", reason.unwrap_or("refused")),
                pid: 0,
                killed: false,
            }));
            self.table.changed();
        }
    }
}

/// Puts `dest` to the person, unless an approval of it is remembered for the process's
/// directory; an approval is of that host exactly (loopback included, where it names one).
fn ask(
    (table, asks): (Arc<Table>, Arc<Asks>),
    answered: Answered,
    id: u64,
    dest: &Dest,
) -> impl std::future::Future<Output = Decision> + Send + 'static {
    let (rule, what) = (
        rule_of(dest),
        format!("{} ({})", dest_text(dest), via_text(dest)),
    );
    async move {
        // One question at a time per tree: the connections behind it wait for its answer.
        let mut answered = answered.lock().await;
        let decision = match answered.get(&rule) {
            Some(Ok(())) => return Decision::Allow { exact: true },
            Some(Err(why)) => return Decision::Deny(why.clone()),
            None => put(&table, &asks, id, (rule.clone(), what)).await,
        };
        let kept = match &decision {
            Decision::Allow { .. } => Ok(()),
            Decision::Deny(why) => Err(why.clone()),
        };
        answered.insert(rule, kept);
        decision
    }
}

/// The question itself, or the remembered approval that spares it.
async fn put(table: &Table, asks: &Arc<Asks>, id: u64, (rule, what): (String, String)) -> Decision {
    let Ok(p) = table.get(id) else {
        return Decision::Deny("its process has ended".into());
    };
    let (pid, cwd) = {
        let rec = p.lock();
        let info = rec.info();
        (info.pid, info.cwd.clone())
    };
    if asks.remembered(&rule, std::path::Path::new(&cwd)).is_some() {
        return Decision::Allow { exact: true };
    }
    let question = Question {
        kind: AskKind::Network,
        what,
        rule,
        pid,
        cwd,
    };
    let rx = match asks.ask(&p, question) {
        Ok(rx) => rx,
        Err(e) => return Decision::Deny(e.message),
    };
    match rx.await {
        Ok(Answer::Approved) => Decision::Allow { exact: true },
        Ok(Answer::Denied(why) | Answer::Stopped(why)) => Decision::Deny(why),
        Ok(Answer::Secret(_)) => Decision::Deny("a password is no approval".into()),
        Err(_) => Decision::Deny("its process ended first".into()),
    }
}
