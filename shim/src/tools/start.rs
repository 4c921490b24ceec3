//! `start`: start a command in the background and return its id at once; with `ensure`, return
//! the running process of that name and command instead of starting a duplicate.

use cuba_protocol::client::Client;
use cuba_protocol::hosts;
use cuba_protocol::{
    ProcessInfo, RequestToken, SpawnRequest, StreamFilter, WaitReason, WaitRequest, WaitSpec,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::asks::{held, Settled};
use super::fanout::NOT_ASKED;
use crate::approve::Tool;
use crate::args::{StartArgs, Strict};
use crate::error::{Failure, Sent};
use crate::hints;
use crate::reply::ProcessReply;
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;

#[tool_router(router = start_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "Start a background process (servers, watchers) and return its id at \
                       once; then wait (until=\"listening\") or status.",
        annotations(destructive_hint = true, open_world_hint = true),
        input_schema = input_schema::<StartArgs>(),
        output_schema = output_schema::<ProcessReply>()
    )]
    async fn start(
        &self,
        Parameters(Strict(a)): Parameters<Strict<StartArgs>>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, CallToolResult> {
        let mut a = a;
        let host = a.common.host.take();
        let ensure = a.ensure == Some(true);
        let req = SpawnRequest {
            shell: a.shell,
            // Stays open: the model closes it with send_input eof.
            stdin: a.stdin.map(String::into_bytes),
            name: a.name,
            session: a.session,
            port: a.port,
            ..a.common.spawn_request(a.command)?
        };
        if let Some(group) = host.as_deref().filter(|h| hosts::is_group(h)) {
            let req = &req;
            let each = |ctx: RequestContext<RoleServer>, host: String| async move {
                // A token of its own: two names of the group may reach the same daemon.
                let mut req = req.clone();
                req.token = Some(RequestToken::fresh());
                let host = Some(host.as_str());
                let (client, info, existing) = self.spawn_on(&ctx, host, &req, ensure).await?;
                let note = Some(NOT_ASKED.to_string());
                self.started(&ctx, (&client, host), info, existing, note)
                    .await
            };
            let max = self.default_output(&ctx);
            return Ok(self.fan_out(&ctx, group, max, each).await?.into());
        }
        let host = host.as_deref();
        let (client, mut info, existing) = self.spawn_on(&ctx, host, &req, ensure).await?;
        // Held for the person's approval: asked through the client where it can, then shown as
        // it stands.
        let mut note = None;
        if info.state == cuba_protocol::ProcState::AwaitingApproval {
            let look = WaitRequest {
                id: info.id,
                since: Some(0),
                spec: WaitSpec::exit(0, 0),
            };
            let now = client
                .wait(look.clone())
                .await
                .map_err(crate::error::remote)?;
            match self
                .settle(&ctx, (&client, host), (Tool::Start, &look), now)
                .await?
            {
                Settled::Ask(q) => return Ok(CallToolResponse::InputRequired(q)),
                Settled::Waited(w, n) => {
                    info = w.process.clone();
                    note = n;
                }
            }
        }
        let reply = self
            .started(&ctx, (&client, host), info, existing, note)
            .await?;
        Ok(reply.into_result().into())
    }
}

impl CubaExec {
    /// One host's start (`ensure`: or the running process of that name and command): the
    /// connection used, the process, and whether it was already running.
    async fn spawn_on(
        &self,
        ctx: &RequestContext<RoleServer>,
        host: Option<&str>,
        req: &SpawnRequest,
        ensure: bool,
    ) -> Result<(Client, ProcessInfo, bool), Failure> {
        let start = |c: Client| {
            let req = req.clone();
            async move {
                match ensure {
                    true => c.ensure(req).await,
                    false => c.spawn(req).await.map(|p| (p, false)),
                }
            }
        };
        let (client, (info, existing)) = self.act(ctx, host, Sent::Command, start).await?;
        Ok((client, info, existing))
    }

    /// The reply of a start: a command that fails at once is answered as run would answer it;
    /// one that runs on, with how to follow it (`note`: why a person was not asked).
    async fn started(
        &self,
        ctx: &RequestContext<RoleServer>,
        (client, host): (&Client, Option<&str>),
        info: ProcessInfo,
        existing: bool,
        note: Option<String>,
    ) -> Result<ProcessReply, Failure> {
        let grace = cuba_protocol::start_grace_ms();
        if !existing && !info.state.is_finished() && grace > 0 {
            // A command that fails at once (its port taken, a bad flag, not found) is said to
            // have ended, with its output, rather than to be running.
            let max = self.default_output(ctx);
            let max32 = u32::try_from(max).unwrap_or(u32::MAX);
            if let Ok(w) = client.start_check(info.id, grace, max32).await {
                if w.reason == WaitReason::Exited {
                    let out = Some(w.output);
                    let both = StreamFilter::Both;
                    return self
                        .process_reply((client, host), &w.process, 0, max, both, out)
                        .await;
                }
            }
        }
        let mut reply = ProcessReply::from_info(&info).on(host);
        if existing {
            reply.existing = Some(true);
            reply.hint = Some(hints::running(info.id, reply.next, info.tty.is_some()));
        } else if !info.state.is_finished() {
            reply.hint = Some(hints::started(&info));
        }
        held(&mut reply, &info, note);
        Ok(reply)
    }
}
