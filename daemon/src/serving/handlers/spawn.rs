//! `Spawn` and `Ensure`: validate the request, check the command policy and the side-effect
//! declarations (a refusal is `BLOCKED` and an audit line), then run it in its session, or
//! reserve a table slot and launch it. A request with a token is carried out once: a retry
//! gets the first attempt's record as it is now (`Ensure`: the same answer kind).

use std::path::{Path, PathBuf};

use cuba_protocol::{AskKind, ProcessInfo, ProtocolError, SpawnRequest};

use super::validate;
use crate::base::side_effects::{self, Refusal};
use crate::processes::launch::LaunchPlan;
use crate::processes::leases;
use crate::serving::daemon::Daemon;
use crate::state::asks::{Answer, Question};
use crate::state::caller::Caller;
use crate::state::record::{Outcome, Writer};
use crate::state::table::Reserved;
use crate::state::tokens::{Claim, Done, Stamp};

/// Starts `req` for `caller`. A process that cannot start (bad cwd, missing shell) is still a
/// record, in state `FailedToStart` with the OS reason.
pub async fn spawn(
    d: &Daemon,
    caller: &Caller,
    req: SpawnRequest,
) -> Result<ProcessInfo, ProtocolError> {
    once(d, caller, req, false).await.map(|(info, _)| info)
}

/// `spawn`, unless a running process of the same name and command exists: then that one
/// (found atomically with the reservation).
pub async fn ensure(
    d: &Daemon,
    caller: &Caller,
    req: SpawnRequest,
) -> Result<(ProcessInfo, bool), ProtocolError> {
    if req.name.is_none() {
        return Err(ProtocolError::bad_request(
            "ensure needs a name: it finds a running process by name and command",
        ));
    }
    if req.session.is_some() {
        return Err(ProtocolError::bad_request(
            "ensure cannot be combined with session: a session runs one command at a time",
        ));
    }
    once(d, caller, req, true).await
}

/// [`start`], once per request token. The claim is finished before any await, so a request
/// task dropped with its connection cannot leave a started process unremembered.
async fn once(
    d: &Daemon,
    caller: &Caller,
    req: SpawnRequest,
    reuse: bool,
) -> Result<(ProcessInfo, bool), ProtocolError> {
    let Some(stamp) = Stamp::of_spawn(&req) else {
        return start(d, caller, req, reuse);
    };
    match d.tokens().claim(stamp).await? {
        Claim::Again(Done::Record { id, existing }) => {
            tracing::debug!(id, token = %stamp.token, "a retried request: not started again");
            Ok((d.table().get(id)?.info(), existing))
        }
        // Digests of spawns and stdin writes never match: the claim refuses it first.
        Claim::Again(Done::Written { .. }) => Err(ProtocolError::bad_request(
            "this request token named a stdin write",
        )),
        Claim::First(pending) => {
            let (info, existing) = start(d, caller, req, reuse)?;
            pending.finish(Done::Record {
                id: info.id,
                existing,
            });
            Ok((info, existing))
        }
    }
}

/// The process started (or, with `reuse`, found: then `true`). A command the policy says to
/// ask about is held instead, in `awaiting_approval`, until a person answers.
fn start(
    d: &Daemon,
    caller: &Caller,
    mut req: SpawnRequest,
    reuse: bool,
) -> Result<(ProcessInfo, bool), ProtocolError> {
    validate::spawn_request(&req)?;
    // `timeout_ms: 0` is no limit, as `timeout 0` is: not a limit already passed, which would
    // stop a process before it could run and call even its successes `timed_out`.
    if req.timeout_ms == Some(0) {
        req.timeout_ms = None;
    }
    let cwd = match &req.cwd {
        Some(c) => Path::new(&caller.client.cwd).join(c),
        None => PathBuf::from(&caller.client.cwd),
    };
    let Checked {
        unresolved,
        mut ask,
        setuid: programs,
    } = allowed(d, caller, &req, &cwd)?;
    let setuid = !programs.is_empty();
    #[cfg(unix)]
    if setuid {
        // The setuid rule joins the policy's, so one answer (or one remembered) covers both.
        let rule = super::setuid::rule(&programs);
        ask = Some(match ask {
            Some(policy) => format!("{policy}; {rule}"),
            None => rule,
        });
    }
    // A remembered approval: not asked again here, nor at its exec.
    let mut approved = None;
    if let Some(rule) = ask.take() {
        match d.asks().remembered(&rule, &cwd) {
            Some(r) => {
                let shown = cwd.display().to_string();
                d.table()
                    .audit()
                    .remembered(caller.who(), (&req.command, &shown), &r);
                approved = Some(rule);
            }
            None => ask = Some(rule),
        }
    }
    if req.session.is_some() {
        if let Some(rule) = ask {
            // A session's shell runs what it is sent at once: nothing there can be held.
            return Err(ProtocolError::new(
                cuba_protocol::ErrorKind::Blocked,
                format!(
                    "this command needs a person's approval first ({rule}), and a command in a \
                     session cannot be held for it: run it without `session`"
                ),
            ));
        }
        return d
            .sessions()
            .run(caller, req, &cwd, unresolved)
            .map(|info| (info, false));
    }
    let table = d.table();
    let mut new = caller.new_record(&req, &cwd);
    // The port is chosen and its record reserved under one gate: no other spawn gets it.
    let gate = req.port.map(|_| leases::gate());
    if let (Some(wish), Some(gate)) = (req.port, &gate) {
        let port = leases::choose(gate, table, caller, wish)?;
        leases::into_env(&mut req.env, port);
        new.port = Some(port);
    }
    let w = match table.reserve(new, reuse)? {
        Reserved::New(w) => w,
        Reserved::Existing(p) => return Ok((p.info(), true)),
    };
    drop(gate);
    {
        let mut rec = w.lock();
        rec.unresolved = unresolved;
        rec.approved_rules.extend(approved);
    }
    let p = w.proc().clone();
    let launcher = d.launcher();
    let defaults = (launcher.shell(), launcher.confinement(caller));
    let command = req.command.clone();
    let approved_setuid = setuid && ask.is_none();
    let mut plan = LaunchPlan::command(
        p.id,
        req,
        caller,
        cwd.clone(),
        defaults,
        &table.marker(p.id),
    );
    plan.privileged = approved_setuid;
    if let Some(rule) = ask {
        hold(d, caller, w, (plan, setuid), (rule, command, cwd))?;
        return Ok((p.info(), false));
    }
    // A process that could not start is a record too: its state says why.
    let _ = launcher.launch(caller, w, plan, None);
    // Its row without its cgroup's figures: a process started a moment ago has used nothing
    // worth three file reads on the way to the reply.
    let info = p.lock().snapshot();
    Ok((info, false))
}

/// Holds reserved record `p` until a person answers the question of `rule` about `command`:
/// approved, it is launched as `plan` says; denied (or unanswered), it ends `denied`; stopped
/// meanwhile, it ends `killed`. The wait for the answer is its writer until then.
fn hold(
    d: &Daemon,
    caller: &Caller,
    p: Writer,
    (mut plan, setuid): (LaunchPlan, bool),
    (rule, command, cwd): (String, String, PathBuf),
) -> Result<(), ProtocolError> {
    let question = Question {
        kind: AskKind::Command,
        what: command,
        rule: rule.clone(),
        pid: 0,
        cwd: cwd.display().to_string(),
    };
    let table = d.table().clone();
    let rx = match d.asks().ask(p.proc(), question) {
        Ok(rx) => rx,
        Err(e) => {
            p.lock().set_drained();
            table.never_started(&p);
            table.finish(&p, Outcome::denied(e.message.clone()));
            return Err(e);
        }
    };
    let (launcher, caller) = (d.launcher().clone(), caller.clone());
    tokio::spawn(async move {
        let outcome = match rx.await {
            Ok(Answer::Approved) => {
                p.lock().approved_rules.push(rule);
                plan.privileged = setuid;
                // A process that could not start is a record too: its state says why.
                let _ = launcher.launch(&caller, p, plan, None);
                return;
            }
            Ok(Answer::Denied(why)) => Outcome::denied(why),
            Ok(Answer::Secret(_)) => Outcome::denied("a password is no approval".to_string()),
            Ok(Answer::Stopped(why)) => Outcome::stopped_unstarted(why),
            Err(_) => Outcome::denied("it was stopped while awaiting approval".to_string()),
        };
        p.lock().set_drained();
        table.never_started(&p);
        table.finish(&p, outcome);
    });
    Ok(())
}

/// What the policy said of an allowed spawn: the parts of its text it could not resolve before
/// run time (`?(…)`), and the rule that asks a person first.
struct Checked {
    unresolved: Vec<String>,
    ask: Option<String>,
    /// The setuid programs it runs where trees cannot gain privileges: asked about first.
    setuid: Vec<String>,
}

/// The connection's policy (the daemon's, narrowed per client) and the side-effect
/// declarations. Unknown side-effect names are `BAD_REQUEST`; a refusal is `BLOCKED` and
/// audited.
fn allowed(
    d: &Daemon,
    caller: &Caller,
    req: &SpawnRequest,
    cwd: &Path,
) -> Result<Checked, ProtocolError> {
    let refused = |decision: &cuba_protocol::PolicyDecision| {
        let cwd = cwd.display().to_string();
        d.table()
            .audit()
            .refused(caller.who(), &req.command, &cwd, decision);
    };
    let decision = match unread_shell(d, req.shell.as_deref()) {
        Some(shell) => caller.policy.check_unread(shell, &req.command, cwd),
        None => caller
            .policy
            .check_spawn(req.shell.as_deref(), &req.command, cwd),
    };
    if !decision.allowed {
        refused(&decision);
        // One sentence: whose policy, the rule's words with the sub-command, and the fix; the
        // rule's name too where its words do not say it (`is on the blocklist` does).
        let rule = decision.rule.as_deref().unwrap_or("policy");
        let message = match decision.message.contains(rule) {
            true => decision.message,
            false => format!("{} (rule {rule})", decision.message),
        };
        return Err(ProtocolError::new(
            cuba_protocol::ErrorKind::Blocked,
            message,
        ));
    }
    // Asked for and not there, a sandbox refuses the command rather than being ignored.
    #[cfg(windows)]
    if d.launcher().confinement(caller).sandbox.active() {
        return Err(ProtocolError::new(
            cuba_protocol::ErrorKind::Blocked,
            format!(
                "a sandbox was asked for, and {}; the command was not run",
                crate::platform::windows::SANDBOX
            ),
        ));
    }
    let unresolved = decision
        .commands
        .iter()
        .filter(|c| c.starts_with("?("))
        .cloned()
        .collect();
    // The caller's word, not verified.
    match side_effects::check(&req.side_effects, &d.config().blocked_side_effects) {
        Ok(()) => {}
        Err(Refusal::Bad(e)) => return Err(e),
        Err(Refusal::Blocked(e, decision)) => {
            refused(&decision);
            return Err(e);
        }
    }
    let ask = decision.ask.or_else(|| {
        let category = caller.policy.rules().ask.side_effect(&req.side_effects)?;
        Some(format!("ask_side_effects: {category}"))
    });
    let setuid = setuid_programs(d, caller, req, cwd, &decision.commands);
    if !setuid.is_empty() && d.launcher().confinement(caller).sandbox.active() {
        let why = blocked_setuid(&setuid);
        return Err(ProtocolError::new(cuba_protocol::ErrorKind::Blocked, why));
    }
    Ok(Checked {
        unresolved,
        ask,
        setuid,
    })
}

/// The setuid programs `commands` run, where a tree of `caller` could not gain privileges
/// (none elsewhere: there they run as they always do).
fn setuid_programs(
    d: &Daemon,
    caller: &Caller,
    req: &SpawnRequest,
    cwd: &Path,
    commands: &[String],
) -> Vec<String> {
    #[cfg(unix)]
    if d.launcher().strips_privileges(caller) {
        let find = |env: &cuba_protocol::Env| {
            let (_, v) = env.iter().rev().find(|(k, _)| k == "PATH")?;
            Some(v.to_string_lossy().into_owned())
        };
        let path = find(&req.env).or_else(|| find(&caller.client.env));
        return super::setuid::programs(commands, path.as_deref(), cwd);
    }
    let _ = (d, caller, req, cwd, commands);
    Vec::new()
}

#[cfg(unix)]
fn blocked_setuid(programs: &[String]) -> String {
    super::setuid::refused_in_sandbox(programs)
}

#[cfg(not(unix))]
fn blocked_setuid(_programs: &[String]) -> String {
    String::new()
}

/// The shell that will run a command when the policy cannot read its text (Windows' `cmd.exe`
/// and PowerShell): the text is then judged as a whole (`check_unread`). `None` on Unix,
/// where the text is parsed as POSIX shell.
pub fn unread_shell<'a>(d: &'a Daemon, named: Option<&'a str>) -> Option<&'a str> {
    #[cfg(windows)]
    {
        let shell = named.unwrap_or(&d.config().shell);
        (!crate::platform::win_shell::Kind::of(shell).parsed()).then_some(shell)
    }
    #[cfg(unix)]
    {
        let _ = (d, named);
        None
    }
}
