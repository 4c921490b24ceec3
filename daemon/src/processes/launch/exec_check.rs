//! The exec-check layer (Linux): the child installs the filter as its last hook, and its
//! listener goes to the checker thread with what decides the tree's execs, before the spawn
//! (the child's own first exec waits for that thread's answer). A sandboxed tree's judge also
//! holds its Unix socket rule, which its record keeps for an upgrade.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, Weak};

use cuba_protocol::ExecBlocked;

use super::error::{LaunchError, Stage};
use super::layer::Layer;
use super::plan::Confinement;
use crate::base::policy::Effective;
use crate::parts::exec_rules::{Exec, ExecRules, Refusal, Target, Verdict};
use crate::parts::unix_sockets::{SocketRule, Sockets};
use crate::platform::exec_check::{
    self, AskStart, Checker, ChildEnd, Judge, Made, Pending, Reply, SocketAsk, Source, Watch,
};
use crate::platform::spawn::{Attend, Spawn};
use crate::state::asks::{Answer, Asks, Question};
use crate::state::record::{Note, Proc, Writer};
use crate::state::table::Table;

/// The checker and how its filters are installed.
pub struct ExecService {
    checker: Checker,
    no_new_privs: bool,
    /// Namespace and mount calls in checked trees are refused (`namespaces = "refuse"`).
    refuse_namespaces: bool,
    /// The daemon's own socket: a sandboxed tree may connect to it (`cubactl`, the askpass
    /// helper); the daemon's connect for it is told to be the caller's (the exec checks'
    /// `peers.rs`).
    own_socket: std::path::PathBuf,
}

impl ExecService {
    pub fn start(refuse_namespaces: bool, own_socket: &Path) -> std::io::Result<ExecService> {
        let own_socket = std::path::absolute(own_socket).unwrap_or_else(|_| own_socket.into());
        Ok(ExecService {
            checker: Checker::start(refuse_namespaces, own_socket.clone())?,
            no_new_privs: !exec_check::privileged(),
            refuse_namespaces,
            own_socket,
        })
    }

    /// Stops the checker between two notifications for a hand-over (see
    /// [`Checker::pause`]).
    pub async fn pause(
        &self,
        within: std::time::Duration,
    ) -> Result<exec_check::Paused, Option<Vec<i32>>> {
        self.checker.pause(within).await
    }

    /// Takes over the listener of a process handed over by an upgrade.
    pub fn adopt(
        &self,
        (table, asks): (&Arc<Table>, &Arc<Asks>),
        p: &Arc<Proc>,
        listener: OwnedFd,
    ) {
        let (policy, sockets) = {
            let rec = p.lock();
            (rec.policy.clone(), rec.sockets.clone())
        };
        let Some(policy) = policy else { return };
        // A tree whose filter hands its socket calls over without a rule kept for it (none
        // can be had) is allowed only the sockets it makes.
        let sockets = sockets.unwrap_or_default();
        let judge = ProcJudge::judge((table, asks), p, (&policy, sockets), self.no_new_privs);
        let w = Watch {
            source: Source::Listener(listener),
            judge,
        };
        if let Err(e) = self.checker.watch(w) {
            tracing::error!(id = p.id, "exec checks: {e}");
        }
    }
}

struct ProcJudge {
    rules: ExecRules,
    /// The tree's Unix socket rule (empty where it has none: its filter hands over no socket
    /// call then).
    sockets: Arc<Sockets>,
    table: Arc<Table>,
    asks: Arc<Asks>,
    proc: Weak<Proc>,
    /// The last refusal reported (pid, program, arguments): the same one again is not.
    last: std::sync::Mutex<Option<(u32, String, Vec<String>)>>,
}

impl ProcJudge {
    fn judge(
        (table, asks): (&Arc<Table>, &Arc<Asks>),
        p: &Arc<Proc>,
        (policy, sockets): (&Effective, Arc<Sockets>),
        nnp: bool,
    ) -> Arc<dyn Judge> {
        Arc::new(ProcJudge {
            rules: ExecRules::new(policy, nnp),
            sockets,
            table: table.clone(),
            asks: asks.clone(),
            proc: Arc::downgrade(p),
            last: std::sync::Mutex::new(None),
        })
    }
}

impl Judge for ProcJudge {
    fn decide(&self, exec: &Exec) -> Verdict {
        self.rules.decide(exec)
    }

    fn wants_argv(&self, t: &Target) -> bool {
        self.rules.wants_argv(t)
    }

    fn ask(&self, exec: &Exec, rule: String, reply: Reply) -> AskStart {
        let Some(p) = self.proc.upgrade() else {
            return AskStart::Refuse(not_asked(exec, &rule, "its process has ended"));
        };
        // Approved for this command already: the person approved the text that runs it.
        if p.lock().approved_rules.contains(&rule) {
            return AskStart::Allow;
        }
        let cwd = crate::platform::proc::cwd(exec.pid as u32).unwrap_or_default();
        if let Some(r) = self.asks.remembered(&rule, &cwd) {
            let info = p.info();
            let what = asked(exec);
            self.table
                .audit()
                .remembered_exec(&info, (&what, &cwd.display().to_string()), &r);
            return AskStart::Allow;
        }
        let question = Question {
            kind: cuba_protocol::AskKind::Exec,
            what: asked(exec),
            rule: rule.clone(),
            pid: exec.pid as u32,
            cwd: cwd.display().to_string(),
        };
        match self.asks.ask(&p, question) {
            Ok(rx) => {
                self.asks.runtime().spawn(async move {
                    let answer = match rx.await {
                        Ok(Answer::Approved) => Ok(()),
                        Ok(Answer::Denied(why) | Answer::Stopped(why)) => Err(why),
                        Ok(Answer::Secret(_)) => Err("a password is no approval".to_string()),
                        Err(_) => Err("its process ended first".to_string()),
                    };
                    reply(answer);
                });
                AskStart::Held
            }
            Err(e) => AskStart::Refuse(not_asked(exec, &rule, &e.message)),
        }
    }

    fn refused(&self, blocked: ExecBlocked) {
        let Some(p) = self.proc.upgrade() else { return };
        {
            // A shell trying each `PATH` entry meets the same program again (`/bin` → `/usr/bin`).
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let this = (blocked.pid, blocked.program.clone(), blocked.argv.clone());
            if last.as_ref() == Some(&this) {
                return;
            }
            *last = Some(this);
        }
        tracing::info!(id = p.id, program = %blocked.program, rule = %blocked.rule, "exec refused");
        let info = p.lock().snapshot();
        self.table.audit().exec_refused(&info, &blocked);
        p.note(Note::Blocked(blocked));
        self.table.changed();
    }

    fn listening(&self, listener: Arc<OwnedFd>) {
        if let Some(p) = self.proc.upgrade() {
            p.note(Note::Listening(listener));
        }
    }

    fn socket(&self, ask: SocketAsk<'_>) -> Result<(), String> {
        match ask {
            SocketAsk::Connect { path, id } => self.sockets.connect(path, id),
            SocketAsk::ConnectAbstract(name) => self.sockets.connect_abstract(name),
            SocketAsk::Bind { dir, name } => self.sockets.bind(dir, name),
        }
    }

    fn made(&self, made: Made<'_>) {
        match made {
            Made::File(id) => self.sockets.made_file(id),
            Made::Name(name) => self.sockets.made_name(name),
        }
    }
}

/// The program and arguments of `exec`, as the person is asked about it.
fn asked(exec: &Exec) -> String {
    match &exec.argv {
        Some(argv) if !argv.is_empty() => argv.join(" "),
        _ => exec.path.clone(),
    }
}

/// An exec that could not be put to the person: refused, saying why.
fn not_asked(exec: &Exec, rule: &str, why: &str) -> Refusal {
    Refusal {
        rule: "ask",
        program: exec.path.clone(),
        message: format!("it matches {rule} and could not be asked about: {why}"),
        errno: libc::EACCES,
    }
}

pub struct ExecLayer {
    service: Arc<ExecService>,
    judge: Option<Arc<dyn Judge>>,
    /// The tree has a Unix socket rule: its filter hands over `connect` and `bind`.
    sockets: bool,
    /// Held until the spawn returned: the child has its copy then.
    child: Option<ChildEnd>,
}

impl ExecLayer {
    /// The layer of record `p`'s tree, started for a client with `policy`, in `cwd` with
    /// `confinement`; a sandboxed tree gets a Unix socket rule ([`socket_rule`]), which the
    /// record keeps.
    pub fn new(
        service: &Arc<ExecService>,
        (table, asks): (&Arc<Table>, &Arc<Asks>),
        p: &Writer,
        (policy, confinement, cwd): (&Effective, &Confinement, &Path),
    ) -> ExecLayer {
        let own = &service.own_socket;
        let rule = socket_rule(confinement, cwd, own).map(|r| Arc::new(Sockets::new(r)));
        p.lock().sockets = rule.clone();
        ExecLayer {
            sockets: rule.is_some(),
            judge: Some(ProcJudge::judge(
                (table, asks),
                p.proc(),
                (policy, rule.unwrap_or_default()),
                service.no_new_privs,
            )),
            service: service.clone(),
            child: None,
        }
    }
}

/// The Unix socket rule of a tree started in `cwd` with `confinement`: only a sandboxed one
/// has one, with the sockets the person allows by name (`unix_sockets`) and the daemon's
/// `own` socket.
fn socket_rule(confinement: &Confinement, cwd: &Path, own: &Path) -> Option<SocketRule> {
    let sandbox = &confinement.sandbox;
    if !sandbox.active() {
        return None;
    }
    let roots = confinement.roots.as_slice();
    let writable = (sandbox.workspace_write).then(|| sandbox.writable(roots, cwd));
    let mut listed = sandbox.unix_sockets.clone();
    listed.push(own.to_path_buf());
    let hidden = sandbox.masks();
    Some(SocketRule::new((roots, cwd), (&listed, hidden), writable))
}

/// Who answers a tree's first exec: the starting thread itself where the start lets it, else
/// the checker's thread.
struct Attended {
    service: Arc<ExecService>,
    socket: Option<OwnedFd>,
    cwd: std::path::PathBuf,
    judge: Arc<dyn Judge>,
}

impl Attend for Attended {
    fn first_exec(&mut self, _pid: i32, done: std::os::fd::RawFd) -> std::io::Result<()> {
        let socket = self
            .socket
            .take()
            .ok_or_else(|| std::io::Error::other("the first exec was answered twice"))?;
        let checker = &self.service.checker;
        checker.answer_first((&socket, done), &self.cwd, self.judge.clone())
    }

    fn elsewhere(&mut self) -> std::io::Result<()> {
        let socket = self
            .socket
            .take()
            .ok_or_else(|| std::io::Error::other("the first exec was answered twice"))?;
        let source = Source::Socket(socket, self.cwd.clone());
        let judge = self.judge.clone();
        self.service
            .checker
            .watch(Watch { source, judge })
            .map_err(std::io::Error::other)
    }
}

impl Layer for ExecLayer {
    fn before(&mut self, cmd: &mut Spawn) -> Result<(), LaunchError> {
        let mut pending = Pending::new().map_err(LaunchError::at(
            Stage::ExecCheck,
            "cannot set up the exec checks",
        ))?;
        pending.install(
            cmd,
            self.service.no_new_privs,
            (self.service.refuse_namespaces, self.sockets),
        );
        let cwd = cmd.cwd().map_or_else(
            || std::env::current_dir().unwrap_or_default(),
            std::path::Path::to_path_buf,
        );
        let (socket, child) = pending.split();
        self.child = Some(child);
        let judge = self.judge.take().ok_or_else(|| {
            LaunchError::new(Stage::ExecCheck, "the exec checks were set up twice")
        })?;
        cmd.attend(Box::new(Attended {
            service: self.service.clone(),
            socket: Some(socket),
            cwd,
            judge,
        }));
        Ok(())
    }

    fn after(&mut self, _pid: i32) -> Result<(), LaunchError> {
        self.child = None;
        Ok(())
    }
}
