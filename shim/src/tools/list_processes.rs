//! `list_processes`: the shared table, every process of every agent and person, one line each.

use cuba_protocol::client::Client;
use cuba_protocol::{ListRequest, ProcState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::Reply;
use crate::args::ListArgs;
use crate::error::Failure;
use crate::reply::{structured, ListReply, ProcessRow};
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;

#[tool_router(router = list_processes_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "The shared process table: every process started by any agent or by a \
                       person (cubactl), with id, state, owner, name, time, output bytes and \
                       command. Filter by state or owner.",
        annotations(read_only_hint = true),
        input_schema = input_schema::<ListArgs>(),
        output_schema = output_schema::<ListReply>()
    )]
    async fn list_processes(
        &self,
        Parameters(a): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        let state = a.state.as_deref().map(parse_state).transpose()?;
        let req = ListRequest {
            state,
            owner: a.owner,
        };
        let list = |c: Client| {
            let req = req.clone();
            async move { c.list(req).await }
        };
        let (_, list) = self.ask(&ctx, list).await?;
        let now = cuba_protocol::now_ms();
        let rows: Vec<ProcessRow> = list.iter().map(|p| ProcessRow::from_info(p, now)).collect();
        let mut text = format!("[processes:{}]", rows.len());
        for r in &rows {
            text.push('\n');
            text.push_str(&r.line());
        }
        Ok(structured(text, &ListReply { processes: rows }, false))
    }
}

/// A state as the model names it (`running`, `waiting_input`, …).
fn parse_state(s: &str) -> Result<ProcState, Failure> {
    let all = [
        ProcState::Running,
        ProcState::WaitingInput,
        ProcState::Exited,
        ProcState::Signaled,
        ProcState::TimedOut,
        ProcState::Killed,
        ProcState::FailedToStart,
        ProcState::Lost,
    ];
    all.into_iter()
        .find(|st| st.as_str() == s.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
            Failure::bad_request(format!(
                "unknown state {s:?}: use one of {}",
                names.join(", ")
            ))
        })
}
