//! What `run`, `start` and `wait` do with a process held for a person's approval: ask through
//! the client where it can (`crate::approve`), then look again; and the retry of a call whose
//! result was the question (2026-07-28), which goes on where the call left off.

use cuba_protocol::client::Client;
use cuba_protocol::{ProcessInfo, StreamFilter, WaitReason, WaitRequest, WaitResult, WaitSpec};
use rmcp::model::{CallToolResponse, CallToolResult, InputRequiredResult, InputResponses};
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use crate::approve::{self, Asked, Resume, Tool};
use crate::error::{remote, Failure};
use crate::hints;
use crate::reply::ProcessReply;
use crate::server::CubaExec;

/// A wait's result once the person was asked: the wait to reply with, or the question the
/// call's result must be.
pub enum Settled {
    Waited(Box<WaitResult>, Option<String>),
    Ask(InputRequiredResult),
}

/// How long a resumed `run` or `wait` waits for the process after the answer.
const RESUMED_WAIT_MS: u64 = 10_000;

impl CubaExec {
    /// `w` came back held for a person (`awaiting_approval`): asks them through the client
    /// (up to [`approve::MAX_ROUNDS`] questions, one after another), waiting again as `req`
    /// after each answer. The note says why a question is left to the other channels.
    pub(super) async fn settle(
        &self,
        ctx: &RequestContext<RoleServer>,
        (client, host): (&Client, Option<&str>),
        (tool, req): (Tool, &WaitRequest),
        mut w: WaitResult,
    ) -> Result<Settled, Failure> {
        let mut note = None;
        for _ in 0..approve::MAX_ROUNDS {
            if w.reason != WaitReason::AwaitingApproval {
                break;
            }
            let resume = Resume {
                tool,
                id: w.process.id,
                ask: 0,
                since: req.since.unwrap_or(0),
                host: host.map(String::from),
            };
            match approve::ask(ctx, client, &w.process, resume).await? {
                Asked::Result(r) => return Ok(Settled::Ask(r)),
                Asked::NotAnswered(why) => {
                    note = Some(why);
                    break;
                }
                Asked::Answered => w = client.wait(req.clone()).await.map_err(remote)?,
            }
        }
        Ok(Settled::Waited(Box::new(w), note))
    }

    /// The retry of a call whose result was a question: the answer in `responses` goes to the
    /// daemon, then the call goes on as `r` says (`run`/`wait`: wait for the process; `start`:
    /// its record), asking again if another question waits.
    pub(crate) async fn resume(
        &self,
        r: Resume,
        responses: InputResponses,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, CallToolResult> {
        let host = r.host.as_deref();
        let id = r.id;
        let (client, info) = self
            .ask(ctx, host, |c| async move { c.info(id).await })
            .await?;
        let name = approve::owner_name(ctx);
        if !approve::mine(&info, &name) {
            return Err(Failure::bad_request(format!(
                "process {id} was not started by {name}: its questions are answered there"
            ))
            .into());
        }
        let decision = approve::answer_of(&name, r.ask, &responses);
        let mut note = match approve::apply(&client, id, r.ask, decision).await? {
            Asked::NotAnswered(why) => Some(why),
            _ => None,
        };
        let max = self.default_output(ctx);
        let req = WaitRequest {
            id,
            since: Some(r.since),
            spec: WaitSpec {
                until: None,
                quiet_ms: None,
                timeout_ms: match r.tool {
                    Tool::Start => 0,
                    _ => RESUMED_WAIT_MS,
                },
                max_bytes: max as u32,
                stream: StreamFilter::Both,
            },
        };
        let w = client.wait(req.clone()).await.map_err(remote)?;
        // Another question right after (an exec of the approved command held): asked too,
        // unless this answer was no answer.
        let w = match note.is_some() {
            true => w,
            false => match self.settle(ctx, (&client, host), (r.tool, &req), w).await? {
                Settled::Ask(q) => return Ok(CallToolResponse::InputRequired(q)),
                Settled::Waited(w, n) => {
                    note = n;
                    *w
                }
            },
        };
        // Approved and still running: a client that keeps tasks gets one, as the call would
        // have had without the question.
        if r.tool != Tool::Start
            && w.reason == WaitReason::Timeout
            && w.process.state == cuba_protocol::ProcState::Running
            && crate::tasks::declared(ctx)
        {
            return Ok(self.task_for((&client, host), &w.process, r.since).await);
        }
        let out = Some(w.output);
        let both = StreamFilter::Both;
        let mut reply = self
            .process_reply((&client, host), &w.process, r.since, max, both, out)
            .await?;
        if r.tool == Tool::Start && w.process.state == cuba_protocol::ProcState::Running {
            reply.hint = Some(hints::started(&w.process));
        }
        held(&mut reply, &w.process, note);
        Ok(reply.into_result().into())
    }
}

/// A reply about a process still held for a person: the hint says so, with why the client did
/// not ask (`note`).
pub fn held(reply: &mut ProcessReply, info: &ProcessInfo, note: Option<String>) {
    if info.state != cuba_protocol::ProcState::AwaitingApproval {
        return;
    }
    reply.hint = Some(hints::awaiting(info, note.as_deref()));
}
