//! `run`: start a command and wait for it, in one round trip; a command still running after
//! `yield_ms` keeps running in the background and the reply says how to follow it.

use cuba_protocol::client::Client;
use cuba_protocol::{
    ProcKind, ProcState, ProcessInfo, RunRequest, Signal, SignalRequest, SpawnRequest,
    StreamFilter, WaitReason, WaitRequest, WaitSpec,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::asks::{held, Settled};
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
        let host = host.as_deref();
        let max = fetch::max_output(a.max_output, self.default_output(&ctx));
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
        // Spawn and wait in one round trip; the wait is the auto-yield.
        let req = RunRequest {
            spawn,
            wait: WaitSpec {
                until: None,
                quiet_ms: None,
                timeout_ms: a.yield_ms.unwrap_or(DEFAULT_YIELD_MS),
                max_bytes: max as u32,
                stream: StreamFilter::Both,
            },
        };
        let run = |c: Client| {
            let req = req.clone();
            async move { c.run(req).await }
        };
        let mut lost = 0;
        let (client, info, w) = loop {
            let (client, running) = self.act(&ctx, host, Sent::Command, run).await?;
            let info = running.info.clone();
            match guarded(&ctx, &client, info.id, running.result()).await {
                // Lost while waiting: the same request (its token) starts nothing, and the
                // daemon waits on the same record again from cursor 0.
                Guarded::Done(Err(e)) if e.connection_lost() && lost < WAIT_RETRIES => {
                    tracing::debug!(id = info.id, "connection lost during a run's wait: {e}");
                    lost += 1;
                }
                Guarded::Done(w) => {
                    let w = w.map_err(|e| lost_while_running(&info, e))?;
                    break (client, info, w);
                }
                Guarded::Cancelled => return Err(cancel(&client, &info).await.into()),
            }
        };
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
        let mut process = w.process;
        // The notice is about this call (e.g. a session started again): keep it even if the
        // record no longer carries it.
        if process.notice.is_none() {
            process.notice = info.notice.clone();
        }
        let reply = self
            .process_reply(
                (&client, host),
                &process,
                0,
                max,
                StreamFilter::Both,
                Some(w.output),
            )
            .await?;
        let mut reply = reply;
        held(&mut reply, &process, note);
        Ok(reply.into_result().into())
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
