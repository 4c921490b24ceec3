//! The MCP client side of the tests: a [`Recorder`] client (named, records progress
//! notifications), connected either to an in-process `CubaExec` over `tokio::io::duplex` or to
//! the real `cuba-exec` binary over stdio, and [`Reply`], a tool result with accessors.

use std::path::Path;
use std::time::{Duration, Instant};

use cuba_exec::CubaExec;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, ProgressNotificationParam, Request, ServerResult,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, RequestHandle, RunningService,
};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{bounded, TestDir, STEP};

/// A progress notification and when it arrived.
pub type Progress = (Instant, ProgressNotificationParam);

/// A client that introduces itself as `name` and forwards every progress notification; given
/// an [`Elicit`], it also says it can ask its user (a form) and answers as that says.
pub struct Recorder {
    name: String,
    progress: mpsc::UnboundedSender<Progress>,
    elicit: Option<Elicit>,
    /// Declares the tasks extension at `initialize`.
    tasks: bool,
    /// Where `notifications/resources/updated` go (their URIs).
    updated: mpsc::UnboundedSender<String>,
}

/// How a client answers the forms put to its user, and where it sends each form's message.
pub struct Elicit {
    /// `Some(content)`: accept with it; `None`: decline.
    pub answer: Option<Value>,
    pub asked: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        if self.elicit.is_some() {
            caps.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        if self.tasks {
            caps.extensions = ClientCapabilities::builder()
                .enable_tasks()
                .build()
                .extensions;
        }
        ClientConfig::new(caps, Implementation::new(self.name.clone(), "0.0.1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let Some(elicit) = &self.elicit else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let message = match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message,
            other => format!("{other:?}"),
        };
        let _ = elicit.asked.send(message);
        Ok(match elicit.answer.clone() {
            Some(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send((Instant::now(), params));
    }
}

pub type Service = RunningService<RoleClient, Recorder>;

/// A connected client and the progress notifications it receives.
pub struct Mcp {
    pub service: Service,
    pub progress: mpsc::UnboundedReceiver<Progress>,
    /// The URIs of `notifications/resources/updated`, as they came.
    pub updated: mpsc::UnboundedReceiver<String>,
}

type Received = (
    mpsc::UnboundedReceiver<Progress>,
    mpsc::UnboundedReceiver<String>,
);

fn recorder(name: &str, elicit: Option<Elicit>) -> (Recorder, Received) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (updated, updates) = mpsc::unbounded_channel();
    let r = Recorder {
        name: name.to_string(),
        progress: tx,
        elicit,
        tasks: false,
        updated,
    };
    (r, (rx, updates))
}

/// An in-process `CubaExec` on `socket`, served over a duplex pipe, with a client named `name`.
pub async fn in_process(socket: &Path, name: &str) -> Mcp {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = CubaExec::new(socket.to_path_buf());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let (handler, (progress, updated)) = recorder(name, None);
    let service = bounded("MCP initialize", STEP, handler.serve(client_io))
        .await
        .expect("the in-process server did not complete the MCP handshake");
    Mcp {
        service,
        progress,
        updated,
    }
}

/// The real `cuba-exec` binary with `t`'s client environment plus `set`, as client `name`.
/// The shim's pid is handed to `t` so its guard kills it.
pub async fn binary(t: &mut TestDir, name: &str, set: &[(&str, &str)]) -> Mcp {
    binary_env(t, name, set, &[]).await
}

/// Like [`binary`], with the variables `unset` removed from the shim's environment.
pub async fn binary_env(t: &mut TestDir, name: &str, set: &[(&str, &str)], unset: &[&str]) -> Mcp {
    binary_with(t, name, set, unset, None, false).await
}

/// Like [`binary`], as a client that keeps long calls as tasks (it declares the extension).
pub async fn binary_tasks(t: &mut TestDir, name: &str) -> Mcp {
    binary_with(t, name, &[], &[], None, true).await
}

/// Like [`binary`], as a client that asks its user through `elicit`.
pub async fn binary_eliciting(t: &mut TestDir, name: &str, elicit: Elicit) -> Mcp {
    binary_with(t, name, &[], &[], Some(elicit), false).await
}

async fn binary_with(
    t: &mut TestDir,
    name: &str,
    set: &[(&str, &str)],
    unset: &[&str],
    elicit: Option<Elicit>,
    tasks: bool,
) -> Mcp {
    let mut cmd = t.client_command(super::shim_bin());
    for k in unset {
        cmd.env_remove(k);
    }
    cmd.envs(set.iter().copied()).env("CUBA_EXEC_LOG", "warn");
    let cmd = tokio::process::Command::from(cmd);
    let transport = TokioChildProcess::new(cmd).expect("cannot start cuba-exec");
    if let Some(pid) = transport.id() {
        t.kill_on_drop(pid as i32);
    }
    let (mut handler, (progress, updated)) = recorder(name, elicit);
    handler.tasks = tasks;
    let service = bounded("MCP initialize", STEP, handler.serve(transport))
        .await
        .expect("cuba-exec did not complete the MCP handshake");
    Mcp {
        service,
        progress,
        updated,
    }
}

/// A tool result, with accessors for the text block and the structured content.
#[derive(Debug)]
pub struct Reply(pub CallToolResult);

impl Reply {
    /// The first text block.
    pub fn text(&self) -> &str {
        self.0
            .content
            .iter()
            .find_map(|c| c.as_text())
            .map_or("", |t| t.text.as_str())
    }

    pub fn is_error(&self) -> bool {
        self.0.is_error == Some(true)
    }

    pub fn sc(&self) -> &Value {
        self.0
            .structured_content
            .as_ref()
            .unwrap_or_else(|| panic!("no structuredContent in {:?}", self.text()))
    }

    pub fn str(&self, key: &str) -> &str {
        self.sc()[key]
            .as_str()
            .unwrap_or_else(|| panic!("no string {key:?} in {}", self.sc()))
    }

    pub fn u64(&self, key: &str) -> u64 {
        self.sc()[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no number {key:?} in {}", self.sc()))
    }

    pub fn id(&self) -> u64 {
        self.u64("id")
    }

    pub fn state(&self) -> &str {
        self.str("state")
    }

    pub fn output(&self) -> &str {
        self.str("output")
    }

    /// The error code (`ENOENT`, `TIMEOUT`, `NOT_FOUND`, …), if any.
    pub fn code(&self) -> Option<&str> {
        self.sc()["code"].as_str()
    }
}

impl Mcp {
    /// Calls `tool` with `args` (a JSON object), failing the test on a protocol error.
    pub async fn call(&self, tool: &str, args: Value) -> Reply {
        self.call_within(tool, args, STEP).await
    }

    pub async fn call_within(&self, tool: &str, args: Value, limit: Duration) -> Reply {
        Reply(
            self.try_call_within(tool, args, limit)
                .await
                .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}")),
        )
    }

    pub async fn try_call_within(
        &self,
        tool: &str,
        args: Value,
        limit: Duration,
    ) -> Result<CallToolResult, rmcp::ServiceError> {
        let Value::Object(args) = args else {
            panic!("tool arguments must be a JSON object");
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        bounded(
            &format!("tools/call {tool}"),
            limit,
            self.service.call_tool(params),
        )
        .await
    }

    /// Calls `tool` once, as a client that keeps tasks reads it: a result, a question or a
    /// task.
    pub async fn call_once(&self, tool: &str, args: Value) -> CallToolResponse {
        let Value::Object(args) = args else {
            panic!("tool arguments must be a JSON object");
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        bounded(
            &format!("tools/call {tool}"),
            STEP,
            self.service.call_tool_once(params),
        )
        .await
        .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}"))
    }

    /// Starts `command` in the background and returns its reply.
    pub async fn start(&self, command: &str) -> Reply {
        let r = self
            .call("start", serde_json::json!({ "command": command }))
            .await;
        assert!(!r.is_error(), "start {command:?} failed: {}", r.text());
        r
    }

    /// Waits (tool `wait`) for process `id` to end; asserts it did.
    pub async fn wait_exit(&self, id: u64, since: u64) -> Reply {
        let args = serde_json::json!({ "id": id, "since": since, "timeout_ms": 15_000 });
        let r = self.call("wait", args).await;
        assert_eq!(
            r.str("wait"),
            "exited",
            "process {id} did not end: {}",
            r.text()
        );
        r
    }

    /// Sends `tools/call` without awaiting the reply: the handle can be awaited or cancelled.
    pub async fn send_call(&self, tool: &str, args: Value) -> RequestHandle<RoleClient> {
        let Value::Object(args) = args else {
            panic!("tool arguments must be a JSON object");
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let request = ClientRequest::CallToolRequest(Request::new(params));
        let options = PeerRequestOptions::no_options();
        bounded(
            "send tools/call",
            STEP,
            self.service.send_cancellable_request(request, options),
        )
        .await
        .unwrap_or_else(|e| panic!("cannot send {tool}: {e}"))
    }

    /// The rows of `list_processes` with `args` as filters.
    pub async fn rows(&self, args: Value) -> Vec<Value> {
        let r = self.call("list_processes", args).await;
        assert!(!r.is_error(), "list_processes failed: {}", r.text());
        r.sc()["processes"]
            .as_array()
            .expect("list_processes has a processes array")
            .clone()
    }

    /// Polls `list_processes` until a running process runs exactly `command` (started by a
    /// request still in flight, whose reply cannot announce it); returns its row.
    pub async fn find_running(&self, command: &str) -> Value {
        let deadline = Instant::now() + STEP;
        loop {
            let rows = self.rows(serde_json::json!({ "state": "running" })).await;
            if let Some(row) = rows.into_iter().find(|r| r["command"] == command) {
                return row;
            }
            assert!(Instant::now() < deadline, "{command:?} never ran");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Closes the client side (the server sees end of input).
    pub async fn close(self) {
        let _ = bounded("close the MCP client", STEP, self.service.cancel()).await;
    }
}

/// Awaits a `tools/call` sent with [`Mcp::send_call`].
pub async fn reply_of(handle: RequestHandle<RoleClient>, limit: Duration) -> Reply {
    let response = bounded("tools/call reply", limit, handle.await_response())
        .await
        .unwrap_or_else(|e| panic!("tools/call failed at the protocol level: {e}"));
    match response {
        ServerResult::CallToolResult(r) => Reply(r),
        other => panic!("tools/call got {other:?}"),
    }
}
