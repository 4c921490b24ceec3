//! `send_signal`: a signal to a process's whole tree; SIGTERM escalates to SIGKILL after the
//! grace period, and the signals that end a process wait until it has ended.

use cuba_protocol::{ProcState, Signal, SignalRequest};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::Reply;
use crate::args::SendSignalArgs;
use crate::error::{Failure, Sent};
use crate::reply::ProcessReply;
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;

#[tool_router(router = send_signal_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "Kill, stop or interrupt a process: a signal to its whole tree. A command \
                       in a session is interrupted and the session stays.",
        annotations(destructive_hint = true),
        input_schema = input_schema::<SendSignalArgs>(),
        output_schema = output_schema::<ProcessReply>()
    )]
    async fn send_signal(
        &self,
        Parameters(a): Parameters<SendSignalArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        let signal: Signal =
            a.signal.as_deref().unwrap_or("SIGTERM").parse().map_err(
                |e: <Signal as std::str::FromStr>::Err| Failure::bad_request(e.to_string()),
            )?;
        let ends = matches!(
            signal,
            Signal::Term | Signal::Kill | Signal::Int | Signal::Hup
        );
        let req = SignalRequest {
            id: a.id,
            signal,
            escalate: signal == Signal::Term,
            grace_ms: None,
            wait: ends,
        };
        let (_, info) = self
            .act(
                &ctx,
                a.host.as_deref(),
                Sent::Signal(a.id),
                |c| async move { c.signal(req).await },
            )
            .await?;
        let mut reply = ProcessReply::from_info(&info).on(a.host.as_deref());
        // Stopping on request is what was asked for: not a failure.
        if info.state == ProcState::Killed {
            reply.code = None;
            reply.error = None;
        }
        Ok(reply.into_result())
    }
}
