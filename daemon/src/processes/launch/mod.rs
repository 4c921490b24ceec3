//! Starting a process: a [`LaunchPlan`] (what to run, where, with what) carried out by layers,
//! each one concern with its part before and after the spawn (`layer.rs`): the program
//! (`program.rs`), stdio on pipes in a process group of its own (`pipes.rs`, `group.rs`) or on
//! a terminal (`terminal.rs`), the sandbox and the resource limits. Then the record gets its
//! handles and the child goes to its supervisor, and the stdin writer starts.

#[cfg(unix)]
mod adopt;
mod askpass;
mod attend;
#[cfg(unix)]
mod cgroup;
mod checking;
mod error;
#[cfg(target_os = "linux")]
mod exec_check;
#[cfg(unix)]
mod group;
#[cfg(unix)]
mod layer;
#[cfg(unix)]
mod limits;
#[cfg(unix)]
mod pipes;
mod plan;
#[cfg(unix)]
mod program;
#[cfg(target_os = "linux")]
mod proxy;
#[cfg(unix)]
mod sandbox;
#[cfg(unix)]
mod spawn;
mod stdin;
#[cfg(unix)]
mod terminal;
#[cfg(windows)]
mod windows;

pub use error::{LaunchError, Stage};

use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::base::config::Sandbox;
use crate::parts::reaper::Reaper;
use crate::parts::tree::TreeRoot;
use crate::platform::cgroup::{AgentGroup, Cgroups, ProcCgroup};
use crate::platform::limits::Limiter;
#[cfg(unix)]
use crate::platform::spawn::Spawn;
use crate::processes::supervise::{supervise, ChildIo, Cleanup, Job, Route};
use crate::state::asks::Asks;
use crate::state::caller::Caller;
use crate::state::record::{Outcome, StdinMsg, TtyData, Writer};
use crate::state::table::Table;
#[cfg(unix)]
pub use adopt::Adopted;
pub use askpass::askpass_env;
pub use checking::ExecChecking;
#[cfg(unix)]
use layer::Layer;
pub use plan::{proxy_rules, Confinement, LaunchPlan};
#[cfg(unix)]
pub use program::write_script;
pub use stdin::StdinSink;

#[cfg(target_os = "linux")]
use proxy::NetProxy;
/// The proxy is Linux's (a network namespace per tree): elsewhere there is none to serve.
#[cfg(all(unix, not(target_os = "linux")))]
pub enum NetProxy {}

/// Control messages queued per supervisor.
const CONTROL_QUEUE: usize = 16;

/// What every launch uses: the table, the reaper, the limits, and the daemon's defaults.
#[derive(Clone)]
pub struct Launcher {
    table: Arc<Table>,
    /// Unix only: on Windows a thread waits on each process handle, and the only limits are
    /// the Job Object's (in `cgroups`).
    #[cfg(unix)]
    reaper: Arc<Reaper>,
    #[cfg(unix)]
    limiter: Arc<Limiter>,
    /// The per-process cgroups, or the mode without them.
    cgroups: Arc<Cgroups>,
    /// TERM → KILL grace period when stopping a tree.
    grace: Duration,
    /// `orphan_timeout`: `None` keeps orphaned commands.
    orphan: Option<Duration>,
    /// `client_gone`, `unwatched_timeout` and the budgets, per agent.
    budgets: Arc<crate::processes::budgets::Budgets>,
    /// The shell that runs commands unless a request names another.
    shell: String,
    /// The daemon's own sandbox, under every command's.
    sandbox: Sandbox,
    /// The proxy of `network = "proxy"`, for every proxied tree.
    #[cfg(unix)]
    proxy: Option<Arc<NetProxy>>,
    /// Whether every exec in a tree is checked, and how.
    exec: Arc<ExecChecking>,
    /// Questions put to the person (an exec the rules ask about waits for its answer).
    asks: Arc<Asks>,
    /// The askpass helper's variables, set for every command under its caller's own: a
    /// program that asks for a password asks the person, never the model.
    askpass: Arc<Vec<(OsString, OsString)>>,
}

/// The daemon's ends of a started child: for its supervisor, its stdin writer and its record.
pub struct Connected {
    pub io: ChildIo,
    pub sink: StdinSink,
    pub tty: Option<TtyData>,
}

/// A child that was spawned and passed every layer.
struct Started {
    connected: Connected,
    root: TreeRoot,
    cgroup: Option<Arc<ProcCgroup>>,
    cleanup: Vec<Cleanup>,
}

impl Launcher {
    pub fn new(
        table: Arc<Table>,
        reaper: Arc<Reaper>,
        (limiter, cgroups): (Arc<Limiter>, Arc<Cgroups>),
        (grace, (orphan, agents), shell, sandbox): (
            Duration,
            (Option<Duration>, crate::base::config::Agents),
            String,
            Sandbox,
        ),
        (exec, asks, askpass): (ExecChecking, Arc<Asks>, Vec<(OsString, OsString)>),
    ) -> Launcher {
        #[cfg(windows)]
        let _ = (reaper, limiter);
        // The rules were checked at the start (`proxy_rules`).
        #[cfg(target_os = "linux")]
        let proxy = (sandbox.proxy.as_ref())
            .and_then(|r| proxy::NetProxy::new(r, &table, &asks).ok())
            .map(Arc::new);
        #[cfg(all(unix, not(target_os = "linux")))]
        let proxy = None;
        let budgets = crate::processes::budgets::Budgets::new(Arc::new(agents), cgroups.clone());
        let budgets = Arc::new(budgets);
        tokio::spawn(budgets.clone().watch(table.clone()));
        Launcher {
            table,
            #[cfg(unix)]
            reaper,
            #[cfg(unix)]
            limiter,
            cgroups,
            grace,
            orphan,
            budgets,
            shell,
            sandbox,
            #[cfg(unix)]
            proxy,
            exec: Arc::new(exec),
            asks,
            askpass: Arc::new(askpass),
        }
    }

    /// The budgets per agent.
    pub fn budgets(&self) -> &Arc<crate::processes::budgets::Budgets> {
        &self.budgets
    }

    /// Questions put to the person.
    pub fn asks(&self) -> &Arc<Asks> {
        &self.asks
    }

    /// Whether execs are checked, one line.
    pub fn exec_checks(&self) -> String {
        self.exec.describe()
    }

    /// The exec checks, for a hand-over to pause them ([`ExecChecking::pause`]).
    #[cfg(unix)]
    pub fn exec_checking(&self) -> &ExecChecking {
        &self.exec
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    #[cfg(unix)]
    pub fn reaper(&self) -> &Arc<Reaper> {
        &self.reaper
    }

    pub fn shell(&self) -> &str {
        &self.shell
    }

    /// At an orderly shutdown, after every process was stopped: the cgroups go.
    pub fn remove_cgroups(&self) {
        self.cgroups.remove();
    }

    /// Which supervision mode is active, and why (`DaemonStatus.supervision`).
    pub fn supervision(&self) -> &str {
        self.cgroups.mode()
    }

    /// Whether a tree `caller` starts runs with `no_new_privs`, so a setuid program in it
    /// (`sudo`) cannot gain anything: under a daemon that is not root, the exec checks set
    /// it, and so does the sandbox (Landlock requires it).
    #[cfg(unix)]
    pub fn strips_privileges(&self, caller: &Caller) -> bool {
        #[cfg(target_os = "linux")]
        let checked = matches!(&*self.exec, ExecChecking::Active(..))
            && !crate::platform::exec_check::privileged();
        #[cfg(not(target_os = "linux"))]
        let checked = false;
        // The confinement's `active()`, without building it (this runs at every spawn).
        let sandboxed =
            self.sandbox.active() || caller.policy.write_confined || caller.policy.no_network;
        checked || (sandboxed && cfg!(target_os = "linux"))
    }

    /// The confinement of what `caller` starts.
    pub fn confinement(&self, caller: &Caller) -> Confinement {
        Confinement::of(caller, &self.sandbox)
    }

    /// Starts the process of the reserved record `p` for `caller` as `plan` says and hands it,
    /// with the right to write its record, to its supervisor (with `route` for a session's
    /// shell). A process that cannot start is finished `failed_to_start` with the reason and
    /// its kind, and the error is returned.
    pub fn launch(
        &self,
        caller: &Caller,
        p: Writer,
        mut plan: LaunchPlan,
        route: Option<Box<dyn Route>>,
    ) -> Result<(), LaunchError> {
        // A connection from inside this process's tree inherits the caller's policy.
        p.lock().policy = Some(caller.policy.clone());
        // Under the caller's environment: a helper of its own (a desktop's) wins.
        plan.env.splice(0..0, self.askpass.iter().cloned());
        let began = Instant::now();
        let stdin = plan.stdin.take();
        let (close_stdin, timeout) = (plan.close_stdin, plan.timeout);
        #[cfg(unix)]
        let exec: Option<Box<dyn Layer>> = match &*self.exec {
            // A setuid program a person approved (`setuid_ask`): this one tree runs unchecked,
            // without `no_new_privs`, so it can gain what the program grants.
            #[cfg(target_os = "linux")]
            ExecChecking::Active(..) if plan.privileged => None,
            #[cfg(target_os = "linux")]
            ExecChecking::Active(service, _) => Some(Box::new(exec_check::ExecLayer::new(
                service,
                (&self.table, &self.asks),
                &p,
                (&caller.policy, &plan.confinement, &plan.cwd),
            ))),
            ExecChecking::Unavailable {
                why,
                required: true,
            } => {
                let why = format!(
                    "exec checks are required (exec_checks = \"on\") and unavailable: {why}"
                );
                return Err(self.failed(caller, &p, LaunchError::new(Stage::ExecCheck, why)));
            }
            _ => None,
        };
        #[cfg(windows)]
        if let ExecChecking::Unavailable {
            why,
            required: true,
        } = &*self.exec
        {
            let why =
                format!("exec checks are required (exec_checks = \"on\") and unavailable: {why}");
            return Err(self.failed(caller, &p, LaunchError::new(Stage::ExecCheck, why)));
        }
        // The agent whose budget holds the tree: a budget that cannot be applied fails it.
        let group = match self.budgets.group(caller, &self.table) {
            Ok(g) => g,
            Err(why) => return Err(self.failed(caller, &p, LaunchError::new(Stage::Cgroup, why))),
        };
        #[cfg(unix)]
        let started = self.start(plan, exec, group);
        #[cfg(windows)]
        let started = self.start(plan, group);
        let started = match started {
            Ok(started) => started,
            Err(e) => return Err(self.failed(caller, &p, e)),
        };
        let Started {
            connected,
            root,
            cgroup,
            cleanup,
        } = started;
        tracing::debug!(
            id = p.id,
            pid = root.pid,
            us = began.elapsed().as_micros() as u64,
            "spawned"
        );
        let (control_tx, control_rx) = mpsc::channel(CONTROL_QUEUE);
        let (stdin_tx, stdin_rx) = mpsc::channel(stdin::QUEUE);
        {
            let mut rec = p.lock();
            rec.tty = connected.tty;
            rec.set_pid(root.pid as u32);
            rec.started();
            rec.root = Some(root.clone());
            rec.cgroup = cgroup;
            rec.control = Some(control_tx);
            // A pipe closed at the start takes no input: nothing can wait for it either (a
            // `make -j` waiting for its jobs in `pselect` is not at a prompt).
            let closed = close_stdin && matches!(connected.sink, stdin::StdinSink::Pipe(_));
            rec.stdin = (!closed).then(|| stdin_tx.clone());
        }
        self.table.started(caller.who(), &p, root.start_time);
        // The queue is empty: these cannot fail for lack of room.
        if let Some(bytes) = stdin {
            let _ = stdin_tx.try_send(StdinMsg::Data(bytes));
        }
        if close_stdin {
            let _ = stdin_tx.try_send(StdinMsg::Eof);
        }
        let first_read = self.first_read(&connected.sink, &p, &root);
        tokio::spawn(stdin::write_stdin(connected.sink, stdin_rx, first_read));
        let (orphan, leftover) = self.attendance(caller, route.is_some());
        let job = Job {
            table: self.table.clone(),
            grace: self.grace,
            timeout,
            route,
            cleanup,
            kill_in: None,
            orphan,
            leftover: Some(leftover),
        };
        tokio::spawn(supervise(job, p, connected.io, control_rx));
        self.table.changed();
        Ok(())
    }

    /// The record `p` finished as failed to start, with `e`'s words and kind.
    fn failed(&self, caller: &Caller, p: &Writer, e: LaunchError) -> LaunchError {
        tracing::debug!(id = p.id, stage = ?e.stage, "failed to start: {}", e.why);
        self.table
            .started(caller.who(), p, crate::platform::StartTime::UNKNOWN);
        p.lock().set_drained();
        self.table
            .finish(p, Outcome::failed_to_start(e.why.clone(), e.kind()));
        e
    }

    /// Runs the layers around the spawn. On an error, what the layers did is undone and no
    /// child is left running.
    #[cfg(unix)]
    fn start(
        &self,
        plan: LaunchPlan,
        exec: Option<Box<dyn Layer>>,
        group: Option<Arc<AgentGroup>>,
    ) -> Result<Started, LaunchError> {
        plan::check_cwd(&plan.cwd)?;
        let LaunchPlan {
            id,
            shell,
            program,
            cwd,
            env,
            terminal,
            confinement,
            ..
        } = plan;
        // The sandbox may need the shell run through a program of its own (macOS).
        let sandbox = sandbox::Sandbox::of(&confinement, &cwd, (id, self.proxy.as_ref()))?;
        let mut cmd = match &sandbox {
            Some(layer) => layer.command(&shell),
            None => Spawn::new(&shell),
        };
        cmd.current_dir(&cwd).env(env);
        let script = self.table.state_dir().script(id);
        let mut layers: Vec<Box<dyn Layer>> = Vec::new();
        // First: its hook runs before every other one, so the child is in its cgroup before
        // it does anything else.
        let cgroup = match self.cgroups.is_active() {
            true => {
                let layer = cgroup::Cgroup::of(&self.cgroups, id, group.as_ref())?;
                let handle = layer.handle();
                layers.push(Box::new(layer));
                Some(handle)
            }
            false => None,
        };
        layers.push(program::layer(program, &shell, script));
        let terminal = match terminal {
            Some(size) => Some(terminal::Terminal::open(&self.reaper, size)?),
            None => {
                layers.push(Box::new(group::ProcessGroup));
                None
            }
        };
        let sandboxed = confinement.sandbox.active();
        if let Some(layer) = sandbox {
            layers.push(Box::new(layer));
        }
        if self.limiter.is_active() {
            let limiter = self.limiter.clone();
            layers.push(Box::new(limits::Limits { limiter }));
        }
        // Last: its hook is the child's last before the exec, which is the first it checks.
        layers.extend(exec);
        let result = self.spawn(cmd, &mut layers, terminal, (&shell, sandboxed));
        let cleanup: Vec<Cleanup> = layers.iter_mut().filter_map(|l| l.undo()).collect();
        match result {
            Ok((connected, pid, start_time)) => Ok(Started {
                connected,
                root: TreeRoot {
                    pid,
                    start_time,
                    marker: self.table.marker(id),
                },
                cgroup,
                cleanup,
            }),
            Err(e) => {
                cleanup.into_iter().for_each(|undo| undo());
                Err(e)
            }
        }
    }
}
