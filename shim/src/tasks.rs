//! Long commands as MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a
//! `run` or `wait` still going after its yield answers a client that declared the extension on
//! that request with a task handle instead of an id to poll. The client keeps the call in its
//! background, polls `tasks/get`, and hands the model the result when the process ends.
//!
//! A task is a daemon process, nothing more: its id names the process (and the output cursor
//! and host the call read from), so any MCP server process answers for it — after an editor
//! restart, a restart of this server or an upgrade of the daemon — and it shows in `cubactl ps`
//! like every other process. Nothing about tasks is kept here.

use cuba_protocol::client::Client;
use cuba_protocol::{
    AskKind, ProcState, ProcessInfo, ReadRequest, Signal, SignalRequest, StreamFilter,
};
use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, ElicitRequest, GetTaskResult, InputRequest,
    InputResponses, JsonObject, MetaObject, Task, TaskPayload, TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use crate::approve::{self, Asked, Channel};
use crate::error::Failure;
use crate::hints;
use crate::CubaExec;

/// The prefix of every task id of ours.
const PREFIX: &str = "cuba/";
/// How often the client is asked to look (Claude Code clamps it to 0.25–30 s). The delay
/// from a process's exit to the model's turn is at most this, plus the client's own.
pub const POLL_INTERVAL_MS: u64 = 1000;
/// The `_meta` key whose `modelImmediateResponse` Claude Code hands the model at once.
const AGENT_TASK: &str = "com.anthropic/agent-task";
/// The last line of output a status message quotes, at most (bytes read, then characters).
const LAST_LINE_BYTES: u32 = 512;
const LAST_LINE_CHARS: usize = 160;

/// Whether the client that sent `ctx`'s request reads a task handle as its result: it declared
/// the extension on this request (2026-07-28), or at `initialize` (2025 eras). Asked per request:
/// Claude Code declares it in its interactive UI only, not for its sub-agents' calls.
pub fn declared(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

/// The tools that answer with a task where the client keeps them.
const TASK_TOOLS: [&str; 2] = ["run", "wait"];

/// `tools` as listed to `ctx`'s client: for one that declared the extension on this request,
/// `run` and `wait` say `taskSupport: "required"` — Copilot CLI reads a task answer only from a
/// tool so marked (and takes a plain result from it too, as a short command gives), while
/// opencode refuses to call a tool so marked, so no one else sees it. Over stdio only: the
/// mark travels in `_meta` for our transport to move (rmcp's `Tool` has no field for it), and
/// the HTTP transport is rmcp's.
pub fn listed(ctx: &RequestContext<RoleServer>, mut tools: Vec<Tool>) -> Vec<Tool> {
    let http = ctx.extensions.get::<http::request::Parts>().is_some();
    if http || !declared(ctx) {
        return tools;
    }
    for tool in tools
        .iter_mut()
        .filter(|t| TASK_TOOLS.contains(&t.name.as_ref()))
    {
        let mut meta = tool.meta.take().unwrap_or_default();
        meta.0.insert(
            crate::transport::EXECUTION_META.into(),
            serde_json::json!({ "taskSupport": "required" }),
        );
        tool.meta = Some(meta);
    }
    tools
}

/// What a task id names: a process, the output cursor its call read from, and its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    pub id: u64,
    pub since: u64,
    pub host: Option<String>,
}

impl TaskRef {
    /// `cuba/12`, `cuba/12.4096` (from a cursor), `cuba/12@build%20box` (on a host): printable
    /// ASCII without spaces, as the extension asks.
    pub fn encode(&self) -> String {
        let mut s = format!("{PREFIX}{}", self.id);
        if self.since > 0 {
            s.push_str(&format!(".{}", self.since));
        }
        if let Some(host) = &self.host {
            s.push('@');
            for b in host.bytes() {
                match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                        s.push(b as char)
                    }
                    _ => s.push_str(&format!("%{b:02X}")),
                }
            }
        }
        s
    }

    pub fn decode(text: &str) -> Option<TaskRef> {
        let rest = text.strip_prefix(PREFIX)?;
        let (proc, host) = match rest.split_once('@') {
            Some((p, h)) => (p, Some(unescape(h)?)),
            None => (rest, None),
        };
        let (id, since) = match proc.split_once('.') {
            Some((i, s)) => (i, s.parse().ok()?),
            None => (proc, 0),
        };
        Some(TaskRef {
            id: id.parse().ok()?,
            since,
            host,
        })
    }
}

/// The host name of a task id, `%XX` escapes undone.
fn unescape(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let host = String::from_utf8(out).ok()?;
    (!host.is_empty()).then_some(host)
}

/// A task id this server did not make, or whose process is gone.
fn unknown(task: &str, why: &str) -> McpError {
    McpError::invalid_params(format!("task {task:?}: {why}"), None)
}

/// A failure talking to the daemon, as a JSON-RPC error of `tasks/*` (its words and fix).
fn failed(f: Failure) -> McpError {
    McpError::internal_error(format!("{}: {}", f.code, f.message), None)
}

/// `tasks/get` when the daemon did not answer with the process: a process no longer in the
/// table is a `failed` task that says so; a daemon out of reach (a restart, a lost link) keeps
/// the task `working` with why, for the next poll to find it again.
fn gone_or_waiting(task_id: String, f: Failure) -> GetTaskResult {
    let now = cuba_protocol::format_utc_ms(cuba_protocol::now_ms());
    let task = Task::new(task_id, TaskStatus::Working, now.clone(), now)
        .with_poll_interval_ms(POLL_INTERVAL_MS);
    if f.code != "NOT_FOUND" {
        let why = format!(
            "cubad did not answer ({}: {}); asking again",
            f.code, f.message
        );
        let task = task.with_status_message(why);
        return GetTaskResult::new(DetailedTask::new(task, TaskPayload::Working));
    }
    let why = format!("its process is no longer in the table ({})", f.message);
    let mut error = JsonObject::new();
    error.insert("code".into(), (-32602).into());
    error.insert("message".into(), why.clone().into());
    let task = task.with_status_message(why);
    GetTaskResult::new(DetailedTask::new(task, TaskPayload::Failed { error }))
}

fn base(task_id: String, info: &ProcessInfo) -> Task {
    let now = cuba_protocol::now_ms();
    let updated = info.ended_at_ms.unwrap_or(now);
    let mut task = Task::new(
        task_id,
        TaskStatus::Working,
        cuba_protocol::format_utc_ms(info.started_at_ms),
        cuba_protocol::format_utc_ms(updated),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    // The record lives until it is pruned: no expiry of our own.
    task.ttl_ms = None;
    task
}

impl CubaExec {
    /// The answer to a `run` or `wait` still going after its yield: a task for process `info`,
    /// read from `since` on `host`. The model reads the note at once (where the client shows it)
    /// and the result when the process ends.
    pub(crate) async fn task_for(
        &self,
        (client, host): (&Client, Option<&str>),
        info: &ProcessInfo,
        since: u64,
    ) -> CallToolResponse {
        let r = TaskRef {
            id: info.id,
            since,
            host: host.map(String::from),
        };
        let status = self.working(client, info).await;
        let note = format!(
            "Process {id} (`{cmd}`) runs on in the background as task {task}: its exit code \
             and output come to you when it ends; no need to wait or poll. send_signal(id={id}) \
             stops it; status(id={id}) shows its output now.",
            id = info.id,
            cmd = short(&info.command),
            task = r.encode(),
        );
        let task = base(r.encode(), info).with_status_message(status);
        let mut meta = MetaObject::new();
        meta.0.insert(
            AGENT_TASK.into(),
            serde_json::json!({ "modelImmediateResponse": note }),
        );
        CallToolResponse::Task(CreateTaskResult::new(task).with_meta(meta))
    }

    /// `tasks/get`: the process's state now, from the daemon.
    pub(crate) async fn task_state(
        &self,
        task_id: String,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let r = TaskRef::decode(&task_id)
            .ok_or_else(|| unknown(&task_id, "not a task of cuba-exec"))?;
        let host = r.host.as_deref();
        let id = r.id;
        let found = self
            .ask(ctx, host, |c| async move { c.info(id).await })
            .await;
        // A task of ours is never a JSON-RPC error: clients give up on one without telling the
        // model (Copilot CLI at the first, Claude Code on some codes) or poll on forever.
        let (client, info) = match found {
            Ok(found) => found,
            Err(f) => return Ok(gone_or_waiting(task_id, f)),
        };
        let task = base(task_id.clone(), &info);
        let payload = match info.state {
            ProcState::Killed => {
                let why = info.error.as_deref().unwrap_or("stopped on request");
                let task = task.with_status_message(format!(
                    "process {id} was stopped ({why}); status(id={id}) shows its output"
                ));
                return Ok(GetTaskResult::new(DetailedTask::new(
                    task,
                    TaskPayload::Cancelled,
                )));
            }
            ProcState::AwaitingApproval => match self.question(ctx, &info) {
                Some(q) => q,
                None => {
                    let task = task.with_status_message(hints::awaiting(&info, None));
                    return Ok(GetTaskResult::new(DetailedTask::new(
                        task,
                        TaskPayload::Working,
                    )));
                }
            },
            ProcState::Running => {
                let status = match info.asks.iter().find(|a| a.kind == AskKind::Password) {
                    Some(ask) => hints::password(&info, ask),
                    None => self.working(&client, &info).await,
                };
                let task = task.with_status_message(status);
                return Ok(GetTaskResult::new(DetailedTask::new(
                    task,
                    TaskPayload::Working,
                )));
            }
            // Ended, or blocked on input only the model can give: the reply a `wait` gives.
            _ => TaskPayload::Completed {
                result: self
                    .task_result(ctx, (&client, host), &info, r.since)
                    .await?,
            },
        };
        Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
    }

    /// `tasks/update`: the person's answer to the question of an `input_required` task.
    pub(crate) async fn task_answer(
        &self,
        task_id: String,
        responses: InputResponses,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let r = TaskRef::decode(&task_id)
            .ok_or_else(|| unknown(&task_id, "not a task of cuba-exec"))?;
        let host = r.host.as_deref();
        let id = r.id;
        let (client, info) = self
            .ask(ctx, host, |c| async move { c.info(id).await })
            .await
            .map_err(failed)?;
        let name = approve::owner_name(ctx);
        if !approve::mine(&info, &name) {
            return Err(McpError::invalid_params(
                format!("process {id} was not started by {name}: its questions are answered there"),
                None,
            ));
        }
        // Every answered question of this process.
        for key in responses.keys() {
            let Some(ask) = approve::ask_of(key) else {
                continue;
            };
            let decision = approve::answer_of(&name, ask, &responses);
            if let Asked::NotAnswered(why) = approve::apply(&client, id, ask, decision)
                .await
                .map_err(failed)?
            {
                tracing::info!(id, ask, "a task's question was not answered: {why}");
            }
        }
        Ok(())
    }

    /// `tasks/cancel`: the process tree stops as a cancelled call's does (TERM, then KILL
    /// after the grace period). The task then reads `cancelled`.
    pub(crate) async fn task_cancel(
        &self,
        task_id: String,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let r = TaskRef::decode(&task_id)
            .ok_or_else(|| unknown(&task_id, "not a task of cuba-exec"))?;
        let stop = SignalRequest {
            id: r.id,
            signal: Signal::Term,
            escalate: true,
            grace_ms: None,
            wait: false,
        };
        let sent = self
            .act(
                ctx,
                r.host.as_deref(),
                crate::error::Sent::Signal(r.id),
                |c| async move { c.signal(stop).await },
            )
            .await;
        match sent {
            Ok(_) => Ok(()),
            // Ended meanwhile: nothing left to stop.
            Err(f) if f.code == "INVALID_STATE" => Ok(()),
            Err(f) => Err(failed(f)),
        }
    }

    /// The question an `input_required` task carries: the approval the process waits for,
    /// where this client can ask its user. `None`: left to the other channels.
    fn question(
        &self,
        ctx: &RequestContext<RoleServer>,
        info: &ProcessInfo,
    ) -> Option<TaskPayload> {
        let ask = approve::askable(info)?;
        let name = approve::owner_name(ctx);
        if !approve::mine(info, &name) || approve::channel(ctx) == Channel::None {
            return None;
        }
        let mut requests = std::collections::BTreeMap::new();
        requests.insert(
            approve::key(ask.id),
            InputRequest::Elicitation(ElicitRequest::new(approve::form(info, ask))),
        );
        Some(TaskPayload::InputRequired {
            input_requests: requests,
        })
    }

    /// A running process's status line: its time, output so far and last line (through the
    /// same view as output, so no secret shows).
    async fn working(&self, client: &Client, info: &ProcessInfo) -> String {
        let secs = cuba_protocol::now_ms().saturating_sub(info.started_at_ms) as f64 / 1000.0;
        let bytes = info.total_bytes();
        let mut status = format!(
            "process {} running {secs:.1} s, {bytes} bytes of output",
            info.id
        );
        if bytes == 0 {
            return status;
        }
        let tail = ReadRequest {
            id: info.id,
            since: None,
            max_bytes: LAST_LINE_BYTES,
            stream: StreamFilter::Both,
        };
        if let Ok(out) = client.read(tail).await {
            let data: Vec<u8> = out
                .chunks
                .iter()
                .flat_map(|c| c.data.iter().copied())
                .collect();
            let text = self.view_for(client).render(&data);
            if let Some(line) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                let line: String = line.trim().chars().take(LAST_LINE_CHARS).collect();
                status.push_str(&format!("; last line: {line}"));
            }
        }
        status
    }

    /// The result of a finished task: the reply `wait` gives at the process's end, shaped for
    /// this client, as JSON.
    async fn task_result(
        &self,
        ctx: &RequestContext<RoleServer>,
        (client, host): (&Client, Option<&str>),
        info: &ProcessInfo,
        since: u64,
    ) -> Result<JsonObject, McpError> {
        let max = crate::fetch::max_output(None, self.default_output(ctx));
        let mut result = match self
            .process_reply((client, host), info, since, max, StreamFilter::Both, None)
            .await
        {
            Ok(reply) => reply.into_result(),
            Err(f) => f.into(),
        };
        self.shape(ctx).shape(&mut result);
        match serde_json::to_value(result) {
            Ok(serde_json::Value::Object(o)) => Ok(o),
            Ok(_) => Err(McpError::internal_error(
                "a tool result is not an object",
                None,
            )),
            Err(e) => Err(McpError::internal_error(
                format!("a tool result did not encode: {e}"),
                None,
            )),
        }
    }
}

/// A command as a note quotes it: its first line, bounded.
fn short(command: &str) -> String {
    let line = command.lines().next().unwrap_or("");
    let mut s: String = line.chars().take(80).collect();
    if s.len() < command.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_id_reads_back_as_written() {
        let cases = [
            TaskRef {
                id: 12,
                since: 0,
                host: None,
            },
            TaskRef {
                id: 7,
                since: 4096,
                host: None,
            },
            TaskRef {
                id: 3,
                since: 9,
                host: Some("build box/é@x%".into()),
            },
        ];
        for r in cases {
            let text = r.encode();
            assert!(text.bytes().all(|b| b.is_ascii_graphic()), "{text}");
            assert_eq!(TaskRef::decode(&text), Some(r));
        }
        assert_eq!(TaskRef::decode("cuba/x"), None);
        assert_eq!(TaskRef::decode("other/1"), None);
        assert_eq!(TaskRef::decode("cuba/1@%zz"), None);
        assert_eq!(TaskRef::decode("cuba/1@"), None);
    }
}
