//! The exec-check layer (Linux): the child installs the filter as its last hook, and its
//! listener goes to the checker thread with what decides the tree's execs, before the spawn
//! (the child's own first exec waits for that thread's answer).

use std::os::fd::OwnedFd;
use std::sync::{Arc, Weak};

use cuba_protocol::ExecBlocked;

use super::error::{LaunchError, Stage};
use super::layer::Layer;
use crate::base::policy::Effective;
use crate::parts::exec_rules::{Exec, ExecRules, Refusal, Target, Verdict};
use crate::platform::exec_check::{
    self, AskStart, Checker, ChildEnd, Judge, Pending, Reply, Source, Watch,
};
use crate::platform::spawn::{Attend, Spawn};
use crate::state::asks::{Answer, Asks, Question};
use crate::state::record::{Note, Proc};
use crate::state::table::Table;

/// The checker and how its filters are installed.
pub struct ExecService {
    checker: Checker,
    no_new_privs: bool,
    /// Namespace and mount calls in checked trees are refused (`namespaces = "refuse"`).
    refuse_namespaces: bool,
}

impl ExecService {
    pub fn start(refuse_namespaces: bool) -> std::io::Result<ExecService> {
        Ok(ExecService {
            checker: Checker::start(refuse_namespaces)?,
            no_new_privs: !exec_check::privileged(),
            refuse_namespaces,
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
        let policy = p.lock().policy.clone();
        let Some(policy) = policy else { return };
        let judge = ProcJudge::judge((table, asks), p, &policy, self.no_new_privs);
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
        policy: &Effective,
        nnp: bool,
    ) -> Arc<dyn Judge> {
        Arc::new(ProcJudge {
            rules: ExecRules::new(policy, nnp),
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
    /// Held until the spawn returned: the child has its copy then.
    child: Option<ChildEnd>,
}

impl ExecLayer {
    pub fn new(
        service: &Arc<ExecService>,
        (table, asks): (&Arc<Table>, &Arc<Asks>),
        p: &Arc<Proc>,
        policy: &Effective,
    ) -> ExecLayer {
        ExecLayer {
            judge: Some(ProcJudge::judge(
                (table, asks),
                p,
                policy,
                service.no_new_privs,
            )),
            service: service.clone(),
            child: None,
        }
    }
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
            self.service.refuse_namespaces,
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
