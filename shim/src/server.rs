//! The MCP server: seven tools (`tools/`) and one resource per process (`resources.rs`), each a
//! thin translation to a `cubad` request. No process state lives here: restarting the editor
//! loses nothing.

use std::path::PathBuf;
use std::sync::Arc;

use regex::Regex;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    Implementation, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool_handler, ErrorData as McpError, RoleServer, ServerHandler};

use crate::link::Link;
use crate::resources;
use crate::view::{View, SECRET_NAMES};

#[derive(Clone)]
pub struct CubaExec {
    tool_router: ToolRouter<Self>,
    /// The connection to cubad, shared by every call.
    pub(crate) link: Arc<Link>,
    /// How output is shown to the model (escapes, redraws, secrets).
    pub(crate) view: Arc<View>,
}

impl CubaExec {
    pub fn new(socket: PathBuf) -> CubaExec {
        CubaExec {
            tool_router: Self::tool_router(),
            link: Arc::new(Link::new(socket)),
            view: Arc::new(view_from_env()),
        }
    }
}

/// The model view the server's environment asks for: `CUBA_EXEC_REDACT` names the variables
/// whose values are hidden, `CUBA_EXEC_RAW_OUTPUT=1` keeps escapes.
fn view_from_env() -> View {
    let names = match std::env::var("CUBA_EXEC_REDACT") {
        Ok(p) => Regex::new(&p)
            .map_err(|e| {
                tracing::warn!("CUBA_EXEC_REDACT is not a valid regex ({e}); using the default")
            })
            .ok()
            .or_else(|| Regex::new(SECRET_NAMES).ok()),
        Err(_) => Regex::new(SECRET_NAMES).ok(),
    };
    let env: Vec<(String, String)> = std::env::vars().collect();
    let strip = std::env::var("CUBA_EXEC_RAW_OUTPUT").map_or(true, |v| v != "1");
    let pairs = env.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    View::new(strip, names.as_ref(), pairs)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CubaExec {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("cuba-exec", cuba_protocol::VERSION))
        .with_instructions(
            "Run shell commands through cuba-exec. `run` waits (auto-yields after yield_ms and \
             returns an id); `start` backgrounds; `wait`/`status` read output with `since` \
             cursors; `send_input`, `send_signal`; `list_processes` shows every process, \
             including those of other agents and people. `tty: true` gives a program a \
             terminal (answer it with send_input keys, see it with view=\"screen\"); \
             `session: \"name\"` runs commands in one persistent shell.",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        resources::list(&self.link, &ctx).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        resources::read(&self.link, &self.view, request, &ctx).await
    }
}
