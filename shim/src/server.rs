//! The MCP server: eight tools (`tools/`) and one resource per process (`resources.rs`), each a
//! thin translation to a `cubad` request. No process state lives here: restarting the editor
//! loses nothing.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cuba_protocol::client::Client;

use regex::Regex;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{tool_handler, ErrorData as McpError, RoleServer, ServerHandler};

use crate::clients::{self, Shape, Structured};
use crate::link::Link;
use crate::resources;
use crate::view::{View, SECRET_NAMES};

#[derive(Clone)]
pub struct CubaExec {
    tool_router: ToolRouter<Self>,
    /// What the model is told once for every tool (`get_info`).
    instructions: Arc<str>,
    /// The connection to cubad, shared by every call.
    pub(crate) link: Arc<Link>,
    /// How output is shown to the model (escapes, redraws, secrets).
    pub(crate) view: Arc<View>,
    /// The views of other hosts: this machine's secrets and theirs.
    views: Arc<Views>,
    /// Which clients get structured content (`CUBA_EXEC_STRUCTURED`).
    structured: Structured,
    /// Output bytes of a reply when the call names no `max_output` (`CUBA_EXEC_MAX_OUTPUT`).
    max_output: u64,
    /// The bound was set (`CUBA_EXEC_MAX_OUTPUT`): it holds for every client.
    max_output_set: bool,
    /// Resource subscriptions of the 2025 eras, with their relays.
    pub(crate) subscriptions: Arc<crate::subscriptions::Subscriptions>,
}

/// What a view is made of, to make one for another host's environment too.
struct Views {
    strip: bool,
    names: Option<Regex>,
    /// By a hash of the remote environment they were made for (a few hosts).
    made: Mutex<HashMap<u64, Arc<View>>>,
}

/// Views kept at most; more (many daemon restarts with new secrets) start the cache again.
const MAX_VIEWS: usize = 32;

impl CubaExec {
    pub fn new(socket: PathBuf) -> CubaExec {
        let (strip, names) = view_settings();
        let local: Vec<(String, String)> = std::env::vars().collect();
        let pairs = local.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let link = Link::new(socket);
        // A configuration that failed to load keeps `host`, so that its error reaches the model.
        let hosts = !link.hosts().is_empty() || link.hosts_error().is_some();
        let settings = cuba_protocol::hosts::mcp_settings(&|k| std::env::var(k).ok())
            .unwrap_or_else(|e| {
                tracing::warn!("{e}; using the default reply settings");
                Default::default()
            });
        let structured = match settings.structured.as_deref().map(Structured::parse) {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                tracing::warn!("{e}; using auto");
                Structured::Auto
            }
            None => Structured::Auto,
        };
        let max_output =
            crate::fetch::max_output(settings.max_output, crate::fetch::DEFAULT_MAX_OUTPUT);
        let mut tool_router = Self::tools_for(hosts);
        clients::declare_result_size(&mut tool_router, max_output);
        CubaExec {
            tool_router,
            instructions: instructions(hosts, max_output).into(),
            link: Arc::new(link),
            view: Arc::new(View::new(strip, names.as_ref(), pairs)),
            views: Arc::new(Views {
                strip,
                names,
                made: Mutex::new(HashMap::new()),
            }),
            structured,
            max_output,
            max_output_set: settings.max_output.is_some(),
            subscriptions: Arc::default(),
        }
    }

    /// The connections of the caller of `ctx`: an HTTP session's token's, else this process's.
    pub(crate) fn link<'a>(&'a self, ctx: &'a RequestContext<RoleServer>) -> &'a Link {
        match crate::http::caller(ctx) {
            Some(caller) => &caller.link,
            None => &self.link,
        }
    }

    /// How replies are shaped for the client of `ctx`.
    pub(crate) fn shape(&self, ctx: &RequestContext<RoleServer>) -> Shape {
        let client = ctx.client_info();
        Shape::for_client(self.structured, client.as_ref().map(|c| c.name.as_str()))
    }

    /// Output bytes of a reply to the client of `ctx` when the call names no `max_output`: the
    /// setting, else the default, or less for a client that cuts a smaller result.
    pub(crate) fn default_output(&self, ctx: &RequestContext<RoleServer>) -> u64 {
        match self.shape(ctx).max_output {
            Some(cap) if !self.max_output_set => cap.min(self.max_output),
            _ => self.max_output,
        }
    }

    /// The view for output read through `client`: on another host, that host's secret values
    /// (its daemon's environment, from the welcome) are hidden too.
    pub(crate) fn view_for(&self, client: &Client) -> Arc<View> {
        let remote = &client.welcome().env;
        if remote.is_empty() {
            return self.view.clone();
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        remote.hash(&mut hasher);
        let key = hasher.finish();
        let mut made = self.views.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = made.get(&key) {
            return v.clone();
        }
        if made.len() >= MAX_VIEWS {
            made.clear();
        }
        let local: Vec<(String, String)> = std::env::vars().collect();
        let theirs: Vec<(String, String)> = remote
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        let pairs = local
            .iter()
            .chain(&theirs)
            .map(|(k, v)| (k.as_str(), v.as_str()));
        let view = Arc::new(View::new(
            self.views.strip,
            self.views.names.as_ref(),
            pairs,
        ));
        made.insert(key, view.clone());
        view
    }
}

/// What every tool shares, said once: the reply header and its cursor, the output view,
/// waiting for input, terminals, sessions, hosts (only where some are configured).
fn instructions(hosts: bool, max_output: u64) -> String {
    let mut text = format!(
        "Shell commands on a daemon shared with other agents and people (cubactl). A reply \
         starts with a header: [id:7 exit:0] for a command that ended, shown whole; one that \
         runs on or was cut adds its time, bytes, trunc (bytes cut) and next, e.g. [id:9 \
         state:running time:10003ms bytes:812 next:812]: pass `next` as `since` to status or \
         wait to read only newer output. Output beyond \
         max_output (default {max_output} bytes, {} lines) keeps its head and tail with a \
         marker for the cut; all of it stays readable by cursor. A \
         process blocked reading input is state:waiting_input with its prompt: answer with \
         send_input. tty: true gives a terminal (send_input keys; view=\"screen\" shows it); \
         session=\"name\" keeps one shell across runs. Errors name a code and a fix.",
        crate::fetch::max_lines(max_output)
    );
    if hosts {
        text.push_str(
            " host=\"name\" aims any tool at a machine from list_hosts (ids are per host); \
             a group, host=\"web*\" or \"a,b\" (\"*\": all), runs run/start on each, or \
             lists them (list_processes).",
        );
    }
    text
}

/// What the server's environment asks of the model view: `CUBA_EXEC_RAW_OUTPUT=1` keeps
/// escapes, `CUBA_EXEC_REDACT` names the variables whose values are hidden.
fn view_settings() -> (bool, Option<Regex>) {
    let names = match std::env::var("CUBA_EXEC_REDACT") {
        Ok(p) => Regex::new(&p)
            .map_err(|e| {
                tracing::warn!("CUBA_EXEC_REDACT is not a valid regex ({e}); using the default")
            })
            .ok()
            .or_else(|| Regex::new(SECRET_NAMES).ok()),
        Err(_) => Regex::new(SECRET_NAMES).ok(),
    };
    let strip = std::env::var("CUBA_EXEC_RAW_OUTPUT").map_or(true, |v| v != "1");
    (strip, names)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CubaExec {
    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        clients::drop_client_args(&mut request.arguments);
        let shape = self.shape(&ctx);
        // The retry of a call whose result was a question (2026-07-28): it goes on where that
        // call left off, with the answer; the command is not run again.
        let resume = request
            .request_state
            .as_deref()
            .and_then(crate::approve::Resume::decode);
        let mut response = match resume {
            Some(r) => {
                let answers = request.input_responses.clone().unwrap_or_default();
                self.resume(r, answers, &ctx).await.unwrap_or_else(|mut e| {
                    e.is_error = Some(true);
                    CallToolResponse::Complete(e)
                })
            }
            None => {
                self.tool_router
                    .call(ToolCallContext::new(self, request, ctx))
                    .await?
            }
        };
        if let CallToolResponse::Complete(result) = &mut response {
            bad_arguments(result);
        }
        if let CallToolResponse::Complete(result) = &mut response {
            shape.shape(result);
        }
        Ok(response)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // As rmcp's own listing does: 2026-07-28 clients may cache it (it never changes).
        let cache = ctx
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        Ok(ListToolsResult {
            result_type: Some(rmcp::model::ResultType::COMPLETE),
            tools: crate::tasks::listed(&ctx, self.shape(&ctx).tools(self.tool_router.list_all())),
            meta: None,
            next_cursor: None,
            ttl_ms: cache.then_some(0),
            cache_scope: cache.then_some(rmcp::model::CacheScope::Public),
        })
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("cuba-exec", cuba_protocol::VERSION))
        .with_instructions(self.instructions.to_string())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.task_state(request.task_id, &ctx).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_answer(request.task_id, request.input_responses, &ctx)
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_cancel(request.task_id, &ctx).await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribe_to(request.uri, &ctx).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.unsubscribe_from(request.uri, &ctx);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        crate::subscriptions::accepted(requested)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.listen_to(context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        resources::list(self.link(&ctx), &ctx).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        resources::read(self, request, &ctx).await
    }
}

/// The error rmcp makes of arguments a tool cannot take (bare text: `failed to deserialize
/// parameters: unknown field …`) as every other refusal: `BAD_REQUEST` with what to do, which
/// the model reads and corrects.
fn bad_arguments(result: &mut rmcp::model::CallToolResult) {
    const PREFIX: &str = "failed to deserialize parameters: ";
    if result.is_error != Some(true) || result.structured_content.is_some() {
        return;
    }
    let text = match result.content.as_slice() {
        [block] => block.as_text().map(|t| t.text.clone()),
        _ => None,
    };
    let Some(why) = text.as_deref().and_then(|t| t.strip_prefix(PREFIX)) else {
        return;
    };
    *result = crate::error::Failure::bad_request(format!(
        "{}; call again with the arguments the tool's schema lists",
        why.trim_end_matches('.')
    ))
    .into();
}
