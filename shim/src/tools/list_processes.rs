//! `list_processes`: the shared table, every process of every agent and person, one line each:
//! the newest running ones ([`RUNNING`], or `limit` when larger), the newest finished ones
//! ([`FINISHED`] unless `limit` says otherwise), and a count of those left out. Neither its size
//! nor its cost grows with the commands run or running: the daemon reads figures only for the
//! rows returned.

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

/// Finished processes listed when the caller does not say: enough to see what just ended.
pub const FINISHED: u32 = 5;

/// Running processes listed at most (unless `limit` is larger): a reply inside every tested
/// client's inline limit (≈ 7 KB of text) with a machine full of servers and jobs.
pub const RUNNING: u32 = 50;

#[tool_router(router = list_processes_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "Every agent's and person's processes: running ones (newest 50), the \
                       newest finished, a count of the rest.",
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
            name: a.name,
            finished: Some(a.limit.unwrap_or(FINISHED)),
            running: Some(a.limit.map_or(RUNNING, |l| l.max(RUNNING))),
        };
        // A group (`*` every host, `web*`, `a,b`): each of its hosts, every row naming its own.
        let every = a.host.as_deref().is_some_and(hosts::is_group);
        let names: Vec<Option<String>> = match (every, a.host.as_deref()) {
            (true, Some(group)) => {
                let link = self.link(&ctx);
                let names = link.hosts().group(group).map_err(|e| {
                    Failure::bad_request(format!("{e}. list_hosts shows the hosts there are."))
                })?;
                names.into_iter().map(Some).collect()
            }
            _ => vec![a.host.clone()],
        };
        // Every host at once, each within its own bound: a dead one delays nobody.
        let ctx = &ctx;
        let asks = names.iter().map(|host| {
            let req = req.clone();
            async move {
                let list = |c: Client| {
                    let req = req.clone();
                    async move { c.listing(req).await }
                };
                self.ask_bounded(ctx, host.as_deref(), list).await
            }
        });
        let answers = futures_util::future::join_all(asks).await;
        let now = cuba_protocol::now_ms();
        let mut rows = Vec::new();
        let mut unreachable = Vec::new();
        let (mut hidden, mut hidden_running) = (0, 0);
        let mut budgets = Vec::new();
        for (host, answer) in names.iter().zip(answers) {
            if let Ok(list) = &answer {
                hidden += list.hidden;
                hidden_running += list.hidden_running;
                budgets.extend(list.budgets.iter().map(|b| match host {
                    Some(h) => format!("{h}: {}", b.line()),
                    None => b.line(),
                }));
            }
            match (answer, every) {
                (Ok(list), _) => rows.extend(list.processes.iter().map(|p| {
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
        let mut text = format!("[processes:{}", rows.len());
        if hidden > 0 {
            text.push_str(&format!(" hidden:{hidden}"));
        }
        if hidden_running > 0 {
            text.push_str(&format!(" running_hidden:{hidden_running}"));
        }
        text.push(']');
        for r in &rows {
            text.push('\n');
            text.push_str(&r.line());
        }
        for u in &unreachable {
            text.push_str(&format!("\n[host:{} unreachable: {}]", u.host, u.error));
        }
        // The caller's own agent first, then those running something: a few lines at most.
        for b in budgets.iter().take(MAX_BUDGET_LINES) {
            text.push_str(&format!("\nbudget {b}"));
        }
        if budgets.len() > MAX_BUDGET_LINES {
            let more = budgets.len() - MAX_BUDGET_LINES;
            text.push_str(&format!(
                "\n{more} more agents' budgets: `cubactl ps` shows them."
            ));
            budgets.truncate(MAX_BUDGET_LINES);
        }
        if hidden > 0 {
            text.push_str(&format!(
                "\n{hidden} older finished not shown: raise limit, or filter by state, owner \
                 or name."
            ));
        }
        if hidden_running > 0 {
            text.push_str(&format!(
                "\n{hidden_running} older running not shown: raise limit, or filter by owner or \
                 name; status takes any id."
            ));
        }
        let reply = ListReply {
            processes: rows,
            hidden,
            hidden_running,
            unreachable,
            budgets,
        };
        Ok(structured(text, &reply, false))
    }
}

/// Agents' budget lines a listing shows at most.
const MAX_BUDGET_LINES: usize = 4;

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
