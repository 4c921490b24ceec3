//! `status`: a process's state, exit code and output (the newest bytes, or those after a
//! cursor), or with view="screen" its terminal screen.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::Reply;
use crate::args::{StatusArgs, ViewArg};
use crate::fetch;
use crate::reply::ViewReply;
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;

/// Bytes of output a status without `since` shows: the end, where the news is.
const DEFAULT_TAIL: u64 = 4096;

#[tool_router(router = status_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "A process's state, exit code and output: after `since`, else the last \
                       tail_bytes.",
        annotations(read_only_hint = true),
        input_schema = input_schema::<StatusArgs>(),
        output_schema = output_schema::<ViewReply>()
    )]
    async fn status(
        &self,
        Parameters(a): Parameters<StatusArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        let id = a.id;
        let host = a.host.as_deref();
        let (client, info) = self
            .ask(&ctx, host, |c| async move { c.info(id).await })
            .await?;
        if a.view == Some(ViewArg::Screen) {
            return Ok(self.screen_reply(&client, host, &info).await?.into_result());
        }
        let max = fetch::max_output(a.max_output, self.default_output(&ctx));
        let since = a.since.unwrap_or_else(|| {
            let tail = a.tail_bytes.unwrap_or(DEFAULT_TAIL).min(max);
            info.total_bytes().saturating_sub(tail)
        });
        let filter = a.stream.unwrap_or_default().into();
        let reply = self
            .process_reply((&client, host), &info, since, max, filter, None)
            .await?;
        Ok(reply.into_result())
    }
}
