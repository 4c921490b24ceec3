//! `wait`: until a process exits, prints a line matching `until`, goes quiet, waits for input,
//! or the time is up; then its new output (or screen). Waiting never stops the process.

use cuba_protocol::{ProcState, WaitReason, WaitRequest, WaitSpec};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::asks::{held, Settled};
use super::no_screen;
use crate::approve::Tool;
use crate::args::{ViewArg, WaitArgs};
use crate::error::Failure;
use crate::fetch;
use crate::progress::{guarded, Guarded};
use crate::reply::ViewReply;
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;
use crate::tasks;

const DEFAULT_WAIT_MS: u64 = 30_000;
/// Clients commonly time requests out at 60 s: a wait never blocks longer than this.
const MAX_WAIT_MS: u64 = 55_000;

#[tool_router(router = wait_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "Wait until a process exits, new output matches until, quiet_ms pass \
                       without output, or timeout_ms; returns the new output. Never stops it.",
        annotations(read_only_hint = true),
        input_schema = input_schema::<WaitArgs>(),
        output_schema = output_schema::<ViewReply>()
    )]
    async fn wait(
        &self,
        Parameters(a): Parameters<WaitArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, CallToolResult> {
        let id = a.id;
        let screen = a.view == Some(ViewArg::Screen);
        let host = a.host.as_deref();
        let (client, info) = self
            .ask(&ctx, host, |c| async move { c.info(id).await })
            .await?;
        if screen && info.tty.is_none() {
            // Refused before waiting: the wait would end in the same refusal.
            return Err(no_screen(id).into());
        }
        let max = fetch::max_output(a.max_output, self.default_output(&ctx));
        let since = a.since.unwrap_or(0);
        let filter = a.stream.unwrap_or_default().into();
        let req = WaitRequest {
            id,
            since: Some(since),
            spec: WaitSpec {
                until: a.until,
                quiet_ms: a.quiet_ms,
                timeout_ms: a.timeout_ms.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS),
                // The screen replaces the output: no output bytes to carry.
                max_bytes: if screen { 0 } else { max as u32 },
                stream: filter,
            },
        };
        // A wait changes nothing: one whose connection dropped (a restarted daemon, a killed
        // ssh) is asked again on a new one, from the same cursor.
        let waiting = self.ask(&ctx, host, |c| {
            let req = req.clone();
            async move { c.wait(req).await }
        });
        let (client, w) = match guarded(&ctx, &client, id, waiting).await {
            Guarded::Done(w) => w?,
            Guarded::Cancelled => {
                return Err(Failure::new("CANCELLED", "the wait was cancelled").into())
            }
        };
        // Held for the person's approval: asked through the client where it can.
        let (w, note) = match self
            .settle(&ctx, (&client, host), (Tool::Wait, &req), w)
            .await?
        {
            Settled::Ask(q) => return Ok(CallToolResponse::InputRequired(q)),
            Settled::Waited(w, note) => (*w, note),
        };
        // A plain wait for the end, still running at its time: a client that keeps tasks gets
        // one. A wait for a line, a quiet spell or a screen answers as it always did.
        let plain = req.spec.until.is_none() && req.spec.quiet_ms.is_none() && !screen;
        if plain
            && w.reason == WaitReason::Timeout
            && w.process.state == ProcState::Running
            && tasks::declared(&ctx)
        {
            return Ok(self.task_for((&client, host), &w.process, since).await);
        }
        let mut reply = match screen {
            true => self.screen_reply(&client, host, &w.process).await?,
            false => {
                let out = Some(w.output);
                self.process_reply((&client, host), &w.process, since, max, filter, out)
                    .await?
            }
        };
        let (reason, matched) = match w.reason {
            WaitReason::Exited => ("exited", None),
            WaitReason::Matched(line) => ("matched", Some(line)),
            WaitReason::Quiet => ("quiet", None),
            WaitReason::Timeout => ("timeout", None),
            WaitReason::WaitingInput => ("waiting_input", None),
            WaitReason::AwaitingApproval => ("awaiting_approval", None),
        };
        reply.wait = Some(reason.to_string());
        // The matched line is output too: the model sees it through the same view.
        reply.matched = matched.map(|m| self.view_for(&client).render(m.as_bytes()));
        held(&mut reply, &w.process, note);
        Ok(reply.into_result().into())
    }
}
