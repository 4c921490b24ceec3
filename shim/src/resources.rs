//! One MCP resource per process, `cuba://process/<id>/output`: its output as the model sees
//! it, for clients that attach output to a conversation instead of calling a tool. A client
//! that subscribes (`resources/subscribe`, or `subscriptions/listen` on 2026-07-28) is told
//! when a process's resource changes — it started, waits for input, matched, opened a port, hit
//! a limit, asked, ended — from the daemon's event log: this is one more reader of the log.

use cuba_protocol::{ListRequest, StreamFilter};
use rmcp::model::{
    ListResourcesResult, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use crate::fetch;
use crate::link::Link;

const PREFIX: &str = "cuba://process/";

/// Every process of the table as a resource.
pub async fn list(
    link: &Link,
    ctx: &RequestContext<RoleServer>,
) -> Result<ListResourcesResult, McpError> {
    let client = link.client(ctx, None).await.map_err(internal)?;
    let list = client
        .list(ListRequest::default())
        .await
        .map_err(internal)?;
    let resources = list
        .iter()
        .map(|p| {
            let label = p.name.clone().unwrap_or_else(|| p.command.clone());
            let label: String = label.chars().take(60).collect();
            Resource::new(
                format!("{PREFIX}{}/output", p.id),
                format!("{}: {label}", p.id),
            )
            .with_mime_type("text/plain")
            .with_description(format!("output of process {} ({})", p.id, p.state))
            .with_size(p.total_bytes())
        })
        .collect();
    Ok(ListResourcesResult::with_all_items(resources))
}

/// The URI of process `id`'s resource.
pub fn uri_of(id: u64) -> String {
    format!("{PREFIX}{id}/output")
}

/// The process a resource URI names.
pub fn id_of(uri: &str) -> Option<u64> {
    uri.strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_suffix("/output"))
        .and_then(|id| id.parse::<u64>().ok())
}

/// The daemon's event log from now on (of process `id`, or all).
pub async fn follow(
    client: &cuba_protocol::client::Client,
    id: Option<u64>,
) -> Result<cuba_protocol::client::EventFeed, McpError> {
    let from_now = cuba_protocol::EventsRequest {
        // Past the end: no backlog, only what happens next.
        since: Some(u64::MAX),
        follow: true,
        id,
        max: 0,
    };
    client.follow_events(from_now).await.map_err(internal)
}

/// The output of the process `request` names, from the start, as much as one reply carries.
pub async fn read(
    server: &crate::CubaExec,
    request: ReadResourceRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<ReadResourceResponse, McpError> {
    let id = id_of(&request.uri).ok_or_else(|| {
        McpError::invalid_params(
            format!(
                "unknown resource {}: expected {PREFIX}<id>/output",
                request.uri
            ),
            None,
        )
    })?;
    let client = server.link(ctx).client(ctx, None).await.map_err(internal)?;
    let info = client
        .info(id)
        .await
        .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
    let max = fetch::max_output(None, fetch::RESOURCE_MAX_OUTPUT);
    let view = server.view_for(&client);
    let out = fetch::output(&client, &view, &info, 0, max, StreamFilter::Both, None)
        .await
        .map_err(internal)?;
    Ok(ReadResourceResult::new(vec![ResourceContents::text(out.text, request.uri)]).into())
}

pub fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}
