//! `list_processes`: the shared table, every process of every agent and person, one line each.

use cuba_protocol::client::Client;
use cuba_protocol::hosts;
use cuba_protocol::{ListRequest, ProcState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::Reply;
use crate::args::ListArgs;
use crate::error::Failure;
use crate::reply::{structured, HostError, ListReply, ProcessRow};
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;

#[tool_router(router = list_processes_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "The shared process table: every process started by any agent or by a \
                       person (cubactl), with id, state, owner, name, time, output bytes and \
                       command. Filter by state or owner; host=\"*\" lists every host.",
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
        let every = a.host.as_deref() == Some(hosts::ALL);
        let names: Vec<Option<String>> = match every {
            true => std::iter::once(Some(hosts::LOCAL.to_string()))
                .chain(
                    self.link
                        .hosts()
                        .all()
                        .filter(|h| self.link.hosts().allowed(&h.name))
                        .map(|h| Some(h.name.clone())),
                )
                .collect(),
            false => vec![a.host.clone()],
        };
        // Every host at once, each within its own bound: a dead one delays nobody.
        let ctx = &ctx;
        let asks = names.iter().map(|host| {
            let req = req.clone();
            async move {
                let list = |c: Client| {
                    let req = req.clone();
                    async move { c.list(req).await }
                };
                self.ask_bounded(ctx, host.as_deref(), list).await
            }
        });
        let answers = futures_util::future::join_all(asks).await;
        let now = cuba_protocol::now_ms();
        let mut rows = Vec::new();
        let mut unreachable = Vec::new();
        for (host, answer) in names.iter().zip(answers) {
            match (answer, every) {
                (Ok(list), _) => rows.extend(list.iter().map(|p| {
                    let row = ProcessRow::from_info(p, now);
                    match every {
                        // In the listing of every host, this machine's rows name it too.
                        true => row.named(host.as_deref().unwrap_or(hosts::LOCAL)),
                        false => row.on(host.as_deref()),
                    }
                })),
                (Err(f), false) => return Err(f.into()),
                (Err(f), true) => unreachable.push(HostError {
                    host: host.clone().unwrap_or_default(),
                    error: f.message,
                }),
            }
        }
        let mut text = format!("[processes:{}]", rows.len());
        for r in &rows {
            text.push('\n');
            text.push_str(&r.line());
        }
        for u in &unreachable {
            text.push_str(&format!("\n[host:{} unreachable: {}]", u.host, u.error));
        }
        let reply = ListReply {
            processes: rows,
            unreachable,
        };
        Ok(structured(text, &reply, false))
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
