//! `send_input`: text, then keys, then optionally end of input, to a process's stdin (through
//! its terminal when it has one).

use cuba_protocol::client::Client;
use cuba_protocol::{RequestToken, StdinRequest};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::Reply;
use crate::args::SendInputArgs;
use crate::error::{remote, Failure, Sent};
use crate::hints;
use crate::keys::keys_bytes;
use crate::reply::ProcessReply;
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;

#[tool_router(router = send_input_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "Write text, then keys, to a process's stdin or terminal (C-c interrupts \
                       on a tty); eof closes stdin.",
        annotations(destructive_hint = false),
        input_schema = input_schema::<SendInputArgs>(),
        output_schema = output_schema::<ProcessReply>()
    )]
    async fn send_input(
        &self,
        Parameters(a): Parameters<SendInputArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        let id = a.id;
        let host = a.host.as_deref();
        let mut data = a.text.unwrap_or_default().into_bytes();
        let keys = a.keys.unwrap_or_default();
        let eof = a.eof.unwrap_or(false);
        if data.is_empty() && keys.is_empty() && !eof {
            let refused =
                Failure::bad_request("pass `text`, `keys` or eof=true (or several of them)");
            return Err(refused.into());
        }
        if !keys.is_empty() {
            // What a key sends depends on whether the process has a terminal.
            let (_, info) = self
                .ask(&ctx, host, |c| async move { c.info(id).await })
                .await?;
            data.extend(keys_bytes(&keys, info.tty.is_some())?);
        }
        let sent = data.len();
        // One token for every attempt: a retry after a lost connection is written once.
        let req = StdinRequest {
            id,
            data,
            eof,
            token: Some(RequestToken::fresh()),
        };
        let write = |c: Client| {
            let req = req.clone();
            async move { c.write_stdin(req).await }
        };
        let (client, ()) = self.act(&ctx, host, Sent::Input(id), write).await?;
        let info = client.info(id).await.map_err(remote)?;
        let mut reply = ProcessReply::from_info(&info).on(host);
        reply.hint = Some(hints::sent(&info, sent, eof));
        Ok(reply.into_result())
    }
}
