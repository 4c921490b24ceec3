//! `run`: start a command and wait for it, in one round trip; a command still running after
//! `yield_ms` keeps running in the background and the reply says how to follow it.

use cuba_protocol::client::Client;
use cuba_protocol::hosts;
use cuba_protocol::{
    ProcKind, ProcState, ProcessInfo, RequestToken, RunRequest, Signal, SignalRequest,
    SpawnRequest, StreamFilter, WaitReason, WaitRequest, WaitResult, WaitSpec,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::asks::{held, Settled};
use super::fanout::NOT_ASKED;
use crate::approve::Tool;
use crate::args::{RunArgs, Strict};
use crate::error::{remote, Failure, Sent};
use crate::fetch;
use crate::progress::{guarded, Guarded};
use crate::reply::ProcessReply;
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;
use crate::tasks;

const DEFAULT_YIELD_MS: u64 = 10_000;

#[tool_router(router = run_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "Run a shell command; wait for its exit code and output. Still running \
                       after yield_ms, it runs on and the reply has its id (then wait).",
        annotations(destructive_hint = true, open_world_hint = true),
        input_schema = input_schema::<RunArgs>(),
        output_schema = output_schema::<ProcessReply>()
    )]
    async fn run(
        &self,
        Parameters(Strict(a)): Parameters<Strict<RunArgs>>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, CallToolResult> {
        let mut a = a;
        let host = a.common.host.take();
        let max = fetch::max_output(a.max_output, self.default_output(&ctx));
        let req = run_request(a, max)?;
        if let Some(group) = host.as_deref().filter(|h| hosts::is_group(h)) {
            let req = &req;
            let each = |ctx: RequestContext<RoleServer>, host: String| async move {
                // A token of its own: two names of the group may reach the same daemon.
                let mut req = req.clone();
                req.spawn.token = Some(RequestToken::fresh());
                self.run_in_group(&ctx, &host, &req, max).await
            };
            return Ok(self.fan_out(&ctx, group, max, each).await?.into());
        }
        let host = host.as_deref();
        let (client, info, w) = self.run_wait(&ctx, host, &req).await?;
        // Held for the person's approval: asked through the client where it can.
        let wait = WaitRequest {
            id: info.id,
            since: Some(0),
            spec: req.wait.clone(),
        };
        let (w, note) = match self
            .settle(&ctx, (&client, host), (Tool::Run, &wait), w)
            .await?
        {
            Settled::Ask(q) => return Ok(CallToolResponse::InputRequired(q)),
            Settled::Waited(w, note) => (*w, note),
        };
        // Still running at the yield: a client that keeps tasks gets one instead of an id.
        if w.reason == WaitReason::Timeout
            && w.process.state == ProcState::Running
            && tasks::declared(&ctx)
        {
            return Ok(self.task_for((&client, host), &w.process, 0).await);
        }
        let reply = self.ran((&client, host), &info, w, max, note).await?;
        Ok(reply.into_result().into())
    }
}

/// The request of a `run` (`a` without its host): spawn and wait in one round trip, the wait
/// being the auto-yield.
fn run_request(a: RunArgs, max: u64) -> Result<RunRequest, Failure> {
    // In a session stdin stays open: later commands read it too.
    let close_stdin = a.stdin.is_some() && a.session.is_none();
    let spawn = SpawnRequest {
        shell: a.shell,
        stdin: a.stdin.map(String::into_bytes),
        close_stdin,
        name: a.name,
        session: a.session,
        ..a.common.spawn_request(a.command)?
    };
    Ok(RunRequest {
        spawn,
        wait: WaitSpec {
            until: None,
            quiet_ms: None,
            timeout_ms: a.yield_ms.unwrap_or(DEFAULT_YIELD_MS),
            max_bytes: u32::try_from(max).unwrap_or(u32::MAX),
            stream: StreamFilter::Both,
        },
    })
}

impl CubaExec {
    /// One host's run: the command started and waited for (up to the yield), asked again with
    /// the same token if the connection was lost while waiting; a cancelled call stops it.
    async fn run_wait(
        &self,
        ctx: &RequestContext<RoleServer>,
        host: Option<&str>,
        req: &RunRequest,
    ) -> Result<(Client, ProcessInfo, WaitResult), Failure> {
        let run = |c: Client| {
            let req = req.clone();
            async move { c.run(req).await }
        };
        let mut lost = 0;
        loop {
            let (client, running) = self.act(ctx, host, Sent::Command, run).await?;
            let info = running.info.clone();
            match guarded(ctx, &client, info.id, running.result()).await {
                // Lost while waiting: the same request (its token) starts nothing, and the
                // daemon waits on the same record again from cursor 0.
                Guarded::Done(Err(e)) if e.connection_lost() && lost < WAIT_RETRIES => {
                    tracing::debug!(id = info.id, "connection lost during a run's wait: {e}");
                    lost += 1;
                }
                Guarded::Done(w) => {
                    let w = w.map_err(|e| lost_while_running(&info, e))?;
                    return Ok((client, info, w));
                }
                Guarded::Cancelled => return Err(cancel(&client, &info).await),
            }
        }
    }

    /// The reply of a run that waited as `w` says (`note`: why a person was not asked).
    async fn ran(
        &self,
        (client, host): (&Client, Option<&str>),
        info: &ProcessInfo,
        w: WaitResult,
        max: u64,
        note: Option<String>,
    ) -> Result<ProcessReply, Failure> {
        let mut process = w.process;
        // The notice is about this call (e.g. a session started again): keep it even if the
        // record no longer carries it.
        if process.notice.is_none() {
            process.notice = info.notice.clone();
        }
        let both = StreamFilter::Both;
        let out = Some(w.output);
        let mut reply = self
            .process_reply((client, host), &process, 0, max, both, out)
            .await?;
        held(&mut reply, &process, note);
        Ok(reply)
    }

    /// One host's run in a group's call: no question through the client, no task.
    async fn run_in_group(
        &self,
        ctx: &RequestContext<RoleServer>,
        host: &str,
        req: &RunRequest,
        max: u64,
    ) -> Result<ProcessReply, Failure> {
        let (client, info, w) = self.run_wait(ctx, Some(host), req).await?;
        let note = Some(NOT_ASKED.to_string());
        self.ran((&client, Some(host)), &info, w, max, note).await
    }
}

/// Times a run's wait is asked again (the whole request, with its token) after its connection
/// was lost.
const WAIT_RETRIES: u32 = 2;

/// The wait of a run that started failed: the process exists, so the model must not run the
/// command again if only the connection went.
fn lost_while_running(info: &ProcessInfo, e: cuba_protocol::client::ClientError) -> Failure {
    if !e.connection_lost() {
        return remote(e);
    }
    let id = info.id;
    Failure::new(
        "UNAVAILABLE",
        format!(
            "the connection to cubad was lost while process {id} ran ({e}); it may still be \
             running: status(id={id}) shows it"
        ),
    )
}

/// A cancelled synchronous run takes its process tree with it. In a session the daemon makes
/// that an interrupt of the command (SIGINT, SIGKILL after the grace period) and the session
/// stays.
async fn cancel(client: &Client, info: &ProcessInfo) -> Failure {
    let stop = SignalRequest {
        id: info.id,
        signal: Signal::Term,
        escalate: true,
        grace_ms: None,
        wait: false,
    };
    let _ = client.signal(stop).await;
    Failure::new(
        "CANCELLED",
        match info.kind {
            ProcKind::InSession => {
                "the request was cancelled; the command was interrupted (the session stays)"
            }
            _ => "the request was cancelled; the command was stopped",
        },
    )
}
