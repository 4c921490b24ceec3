//! `list_hosts`: this machine and every configured host, each asked at once: reachable or why
//! not, the round trip of that question, its daemon's version, OS and architecture, shell and
//! running count.

use cuba_protocol::client::Client;
use cuba_protocol::hosts::{self, HostSpec};
use cuba_protocol::DaemonStatus;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Reply;
use crate::reply::structured;
use crate::schema::{input_schema, output_schema};
use crate::server::CubaExec;

#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ListHostsArgs {}

/// One host.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HostRow {
    /// The `host` argument of the other tools ("local" is this machine).
    pub host: String,
    /// How it is reached (`ssh me@build`, a bridge command).
    pub via: String,
    pub reachable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The round trip of the status request, ms, once connected (in no schema, like
    /// `exec_checks`).
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `linux/x86_64`, `macos/aarch64`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<u32>,
    /// Whether its daemon checks every exec: `on (…)`, `unavailable (why)`, `off (…)` (in no
    /// schema: tools/list is paid in every turn; docs/tools.md names it).
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_checks: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct HostsReply {
    pub hosts: Vec<HostRow>,
}

impl HostRow {
    fn new(host: &str, via: String, status: Result<(DaemonStatus, u64), String>) -> HostRow {
        let mut row = HostRow {
            host: host.to_string(),
            via,
            reachable: status.is_ok(),
            error: None,
            latency_ms: None,
            version: None,
            os: None,
            shell: None,
            running: None,
            exec_checks: None,
        };
        match status {
            Ok((s, latency)) => {
                row.latency_ms = Some(latency);
                row.version = Some(s.daemon_version);
                row.os = Some(format!("{}/{}", s.os, s.arch));
                row.shell = Some(s.shell);
                row.running = Some(s.running);
                // A daemon older than the field says nothing of it.
                row.exec_checks = Some(s.exec_checks).filter(|e| !e.is_empty());
            }
            Err(e) => row.error = Some(e),
        }
        row
    }

    fn line(&self) -> String {
        let head = format!("host:{} via:{}", self.host, self.via);
        match (&self.error, &self.os) {
            (Some(e), _) => format!("{head} unreachable: {e}"),
            (None, os) => {
                let mut l = format!(
                    "{head} ok latency:{}ms version:{} os:{} shell:{} running:{}",
                    self.latency_ms.unwrap_or(0),
                    self.version.as_deref().unwrap_or("?"),
                    os.as_deref().unwrap_or("?"),
                    self.shell.as_deref().unwrap_or("?"),
                    self.running.unwrap_or(0)
                );
                // On: one word. Otherwise why, which the model should know before it relies
                // on the exec checks.
                match self.exec_checks.as_deref() {
                    Some(e) if e.starts_with("on") => l.push_str(" exec_checks:on"),
                    Some(e) => l.push_str(&format!(" exec checks: {e}")),
                    None => {}
                }
                l
            }
        }
    }
}

#[tool_router(router = list_hosts_router, vis = "pub(crate)")]
impl CubaExec {
    #[tool(
        description = "Machines `host` can name (\"local\" is this one): reachable or why not, \
                       version, OS, shell, running count.",
        annotations(read_only_hint = true),
        input_schema = input_schema::<ListHostsArgs>(),
        output_schema = output_schema::<HostsReply>()
    )]
    async fn list_hosts(
        &self,
        Parameters(_): Parameters<ListHostsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        let configured: Vec<&HostSpec> = self.link(&ctx).hosts().all().collect();
        let targets: Vec<(String, String)> =
            std::iter::once((hosts::LOCAL.to_string(), "this machine".to_string()))
                .chain(configured.iter().map(|h| (h.name.clone(), h.via())))
                .collect();
        let ctx = &ctx;
        let asks = targets.iter().map(|(name, _)| async move {
            // Timed inside the request: the round trip, not the connection (an ssh handshake
            // on first use), nor the wait for a retry.
            let status = |c: Client| async move {
                let asked = std::time::Instant::now();
                let s = c.status().await?;
                Ok((
                    s,
                    u64::try_from(asked.elapsed().as_millis()).unwrap_or(u64::MAX),
                ))
            };
            self.ask_bounded(ctx, Some(name.as_str()), status)
                .await
                .map_err(|f| f.message)
        });
        let answers = futures_util::future::join_all(asks).await;
        let rows: Vec<HostRow> = targets
            .into_iter()
            .zip(answers)
            .map(|((name, via), status)| HostRow::new(&name, via, status))
            .collect();
        let mut text = format!("[hosts:{}]", rows.len());
        for r in &rows {
            text.push('\n');
            text.push_str(&r.line());
        }
        Ok(structured(text, &HostsReply { hosts: rows }, false))
    }
}
