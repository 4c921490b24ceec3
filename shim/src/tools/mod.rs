//! The eight MCP tools, one file each, each with a router of its own; [`CubaExec::tool_router`]
//! joins them. This file also holds what several tools share: asking cubad (with the retry rule
//! of `link.rs`) and building a process reply from output or from a screen; `fanout.rs` runs
//! `run` and `start` on each host of a group.

mod asks;
mod fanout;
mod list_hosts;
mod list_processes;
mod run;
mod send_input;
mod send_signal;
mod start;
mod status;
mod wait;

use std::future::Future;

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{ErrorReason, OutputRead, ProcessInfo, StreamFilter};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use crate::error::{self, remote, Failure, Sent};
use crate::fetch;
use crate::hints;
use crate::link::{LinkError, Repeat};
use crate::reply::{ErrorsReply, ProcessReply, ScreenReply};
use crate::server::CubaExec;

/// What a tool returns. `Err` is a reply too: a failure the model should see (rmcp marks it
/// `isError`), so a tool body can stop at the first one with `?`.
type Reply = Result<CallToolResult, CallToolResult>;

/// How long one host may take to answer in a listing of several (an ssh handshake, perhaps a
/// daemon start there).
const HOST_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

impl CubaExec {
    /// Every tool. tools/list is sorted by name, whatever the order here.
    pub(crate) fn tool_router() -> ToolRouter<Self> {
        Self::run_router()
            + Self::start_router()
            + Self::status_router()
            + Self::wait_router()
            + Self::send_input_router()
            + Self::send_signal_router()
            + Self::list_processes_router()
            + Self::list_hosts_router()
    }

    /// [`Self::tool_router`] as this server shows it: where no host is configured, without
    /// `host` arguments and `list_hosts` (every session pays for each byte of tools/list, and
    /// they would offer nothing); run's `side_effects` lists the categories, once.
    pub(crate) fn tools_for(hosts: bool) -> ToolRouter<Self> {
        let mut router = Self::tool_router();
        if !hosts {
            router.remove_route("list_hosts");
        }
        for route in router.map.values_mut() {
            let mut schema = route.attr.input_schema.as_ref().clone();
            if let Some(serde_json::Value::Object(props)) = schema.get_mut("properties") {
                if !hosts {
                    props.remove("host");
                }
                if route.attr.name == "run" {
                    if let Some(serde_json::Value::Object(p)) = props.get_mut("side_effects") {
                        let text = format!(
                            "Every category that may apply: {}. A blocked one is refused \
                             (BLOCKED).",
                            cuba_protocol::SIDE_EFFECTS.join(", ")
                        );
                        p.insert("description".into(), text.into());
                    }
                }
            }
            route.attr.input_schema = std::sync::Arc::new(schema);
        }
        dedupe_start(&mut router);
        router
    }

    /// A read (`f` asks the daemon and changes nothing), on a new connection again if the
    /// connection was lost. Returns the connection used, for the calls that follow.
    pub(crate) async fn ask<T, F, Fut>(
        &self,
        ctx: &RequestContext<RoleServer>,
        host: Option<&str>,
        f: F,
    ) -> Result<(Client, T), Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        one_host(host)?;
        // A read is never in doubt: there is nothing it could have done.
        self.link(ctx)
            .call(ctx, host, Repeat::Safe, f)
            .await
            .map_err(|(LinkError::Failed(e) | LinkError::MaybeDone(e))| error::remote_at(host, e))
    }

    /// A read of one host among several (`list_hosts`, `list_processes(host="*")`), within
    /// [`HOST_LIMIT`] so that a dead host delays nobody.
    async fn ask_bounded<T, F, Fut>(
        &self,
        ctx: &RequestContext<RoleServer>,
        host: Option<&str>,
        f: F,
    ) -> Result<T, Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        match tokio::time::timeout(HOST_LIMIT, self.ask(ctx, host, f)).await {
            Ok(r) => r.map(|(_, v)| v),
            Err(_) => Err(Failure::new(
                "UNAVAILABLE",
                format!("no answer within {} s", HOST_LIMIT.as_secs()),
            )),
        }
    }

    /// An action the daemon must not carry out twice (`sent` says which). A command or an input
    /// carries a request token (`f` sends the same request each time), so it is repeated after
    /// any lost connection; a signal only if it never left. If the link gives up after it was
    /// sent, the failure says it may have been done.
    pub(crate) async fn act<T, F, Fut>(
        &self,
        ctx: &RequestContext<RoleServer>,
        host: Option<&str>,
        sent: Sent,
        f: F,
    ) -> Result<(Client, T), Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        one_host(host)?;
        let repeat = match sent {
            Sent::Command | Sent::Input(_) => Repeat::Tokened,
            Sent::Signal(_) => Repeat::IfUnsent,
        };
        self.link(ctx)
            .call(ctx, host, repeat, f)
            .await
            .map_err(|e| error::link(e, sent, host))
    }

    /// The reply for `info` (read through `client`, on `host`) with its output from `since`
    /// (`ready`: output the caller already read, see [`fetch::output`]).
    pub(crate) async fn process_reply(
        &self,
        (client, host): (&Client, Option<&str>),
        info: &ProcessInfo,
        since: u64,
        max: u64,
        filter: StreamFilter,
        ready: Option<OutputRead>,
    ) -> Result<ProcessReply, Failure> {
        let view = self.view_for(client);
        let out = fetch::output(client, &view, info, since, max, filter, ready)
            .await
            .map_err(remote)?;
        let mut reply = ProcessReply::from_info(info).on(host);
        reply.output = out.text;
        reply.truncated = out.truncated;
        reply.dropped = reply.dropped.max(out.dropped);
        reply.next = out.next;
        reply.whole = since == 0 && out.truncated == 0 && out.next >= info.total_bytes();
        reply.hint = hints::for_state(info, reply.next, || hints::prompt(&reply.output));
        if info.state.is_finished() && reply.hint.is_none() {
            reply.hint = hints::sudo(&reply.output);
        }
        // Where the output was cut, its first and last errors are named (and shown).
        if let Some(marks) = info.errors.as_ref().filter(|_| out.cut) {
            let errors = ErrorsReply::from(marks);
            let hint = errors.hint(info.id);
            reply.hint = Some(match reply.hint.take() {
                Some(h) => format!("{h}; {hint}"),
                None => hint,
            });
            reply.errors = Some(errors);
        }
        Ok(reply)
    }

    /// The reply for `info` with its terminal screen instead of its output (view="screen").
    async fn screen_reply(
        &self,
        client: &Client,
        host: Option<&str>,
        info: &ProcessInfo,
    ) -> Result<ProcessReply, Failure> {
        if info.tty.is_none() {
            return Err(no_screen(info.id));
        }
        let view = match client.screen(info.id).await {
            Ok(v) => v,
            Err(ClientError::Remote(e)) if e.reason == Some(ErrorReason::NoTerminal) => {
                return Err(no_screen(info.id))
            }
            Err(e) => return Err(remote(e)),
        };
        let redact = self.view_for(client);
        let screen = ScreenReply::new(view, |l| redact.redact(l));
        let mut reply = ProcessReply::from_info(info).on(host);
        reply.hint = hints::for_state(info, reply.next, || screen.before_cursor());
        reply.screen = Some(screen);
        Ok(reply)
    }
}

/// start's arguments shared with run (flattened `CommandArgs`) say "As in run." instead of
/// repeating run's words: the model reads both in one list.
fn dedupe_start(router: &mut ToolRouter<CubaExec>) {
    const SAME: &str = "As in run.";
    let Some(run) = router.map.get("run") else {
        return;
    };
    let run = run.attr.input_schema.clone();
    let Some(start) = router.map.get_mut("start") else {
        return;
    };
    let mut schema = start.attr.input_schema.as_ref().clone();
    let (Some(serde_json::Value::Object(theirs)), Some(serde_json::Value::Object(ours))) =
        (run.get("properties"), schema.get_mut("properties"))
    else {
        return;
    };
    for (name, prop) in ours.iter_mut() {
        let described = |p: &serde_json::Value| p.get("description").cloned();
        let same =
            described(prop).filter(|d| Some(d) == theirs.get(name).and_then(described).as_ref());
        if let (Some(d), serde_json::Value::Object(p)) = (same, prop) {
            if d.as_str().is_some_and(|d| d.len() > SAME.len()) {
                p.insert("description".into(), SAME.into());
            }
        }
    }
    start.attr.input_schema = std::sync::Arc::new(schema);
}

/// A group (`web*`, `a,b`) where one host is meant: run, start and list_processes fan out
/// (`fanout.rs`) before they get here, and every other call is about an id, which is per host.
fn one_host(host: Option<&str>) -> Result<(), Failure> {
    match host {
        Some(h) if cuba_protocol::hosts::is_group(h) => Err(Failure::bad_request(format!(
            "host {h:?} names a group of hosts; only run, start and list_processes take one. \
             Ids are per host: name the one host the id came from (a group's reply lists each \
             host with its id, as host#id)"
        ))),
        _ => Ok(()),
    }
}

/// The refusal of view="screen" for a process that has no terminal.
fn no_screen(id: u64) -> Failure {
    Failure::bad_request(format!(
        "process {id} has no terminal, so there is no screen to show: use view=\"text\", or \
         start the command with tty: true"
    ))
}
