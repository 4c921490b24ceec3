//! The MCP server: seven tools and one resource per process, each a thin translation to a
//! `cubad` request. No process state lives here: restarting the editor loses nothing.

use std::path::PathBuf;
use std::sync::Arc;

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::keys::{key_bytes, KEY_NAMES};
use cuba_protocol::{
    ErrorKind, ListRequest, ProcKind, ProcState, ProcessInfo, RunRequest, Signal, SignalRequest,
    SpawnRequest, StreamFilter, TtySize, WaitReason, WaitRequest, WaitSpec,
};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, Implementation, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData as McpError, RoleServer, ServerHandler};

use crate::args::*;
use crate::fetch::{self, Fetched};
use crate::link::Link;
use crate::progress::{guarded, Guarded};
use crate::reply::{self, ListReply, ProcessReply, ProcessRow, ScreenReply, ViewReply};

const DEFAULT_YIELD_MS: u64 = 10_000;
const DEFAULT_WAIT_MS: u64 = 30_000;
/// Clients commonly time requests out at 60 s: a wait never blocks longer than this.
const MAX_WAIT_MS: u64 = 55_000;
const DEFAULT_TAIL: u64 = 4096;

#[derive(Clone)]
pub struct CubaExec {
    #[expect(dead_code, reason = "read by the code #[tool_handler] generates")]
    tool_router: ToolRouter<Self>,
    link: Arc<Link>,
}

fn stream(s: Option<StreamArg>) -> StreamFilter {
    match s.unwrap_or_default() {
        StreamArg::Both => StreamFilter::Both,
        StreamArg::Stdout => StreamFilter::Stdout,
        StreamArg::Stderr => StreamFilter::Stderr,
    }
}

/// A daemon error as a tool result the model can act on.
fn remote(e: ClientError) -> CallToolResult {
    let code = e.kind().map_or("UNAVAILABLE", |k| k.code());
    let hint = match code {
        "NOT_FOUND" => " Call list_processes to see the ids there are.",
        "LIMIT" => " Stop a process you no longer need (send_signal), then retry.",
        "UNAVAILABLE" => " The cubad daemon could not be reached; retry, or check its log.",
        _ => "",
    };
    let message = match &e {
        ClientError::Remote(p) => p.message.clone(),
        other => other.to_string(),
    };
    reply::error(code, &format!("{message}.{hint}"))
}

/// Agent runs without a terminal: pagers must not wait for a key, and programs should not draw.
/// A run on a terminal gets none of these: it has a terminal to draw on.
const NO_TERMINAL: [(&str, &str); 3] = [("PAGER", "cat"), ("GIT_PAGER", "cat"), ("TERM", "dumb")];

/// The call's `env`, over the no-terminal defaults (which the call may override) unless the
/// command runs on a terminal.
fn env_pairs(
    env: Option<std::collections::BTreeMap<String, String>>,
    tty: bool,
) -> cuba_protocol::Env {
    let mut env = env.unwrap_or_default();
    if !tty {
        for (k, v) in NO_TERMINAL {
            env.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
    env.into_iter().map(|(k, v)| (k.into(), v.into())).collect()
}

/// The terminal a call asks for; `cols` and `rows` only mean something with `tty: true`.
fn terminal(
    tty: Option<bool>,
    cols: Option<u16>,
    rows: Option<u16>,
) -> Result<Option<TtySize>, CallToolResult> {
    if tty == Some(true) {
        return Ok(Some(TtySize {
            cols: cols.unwrap_or(TtySize::DEFAULT.cols),
            rows: rows.unwrap_or(TtySize::DEFAULT.rows),
        }));
    }
    if cols.is_some() || rows.is_some() {
        return Err(reply::error(
            "BAD_REQUEST",
            "cols and rows size a terminal: pass them with tty: true, or leave them out",
        ));
    }
    Ok(None)
}

/// The refusal of view="screen" for a process that has no terminal.
fn no_screen(id: u64) -> CallToolResult {
    reply::error(
        "BAD_REQUEST",
        &format!(
            "process {id} has no terminal, so there is no screen to show: use view=\"text\", \
             or start the command with tty: true"
        ),
    )
}

fn running_hint(id: u64, next: u64, tty: bool) -> String {
    let screen = match tty {
        true => format!("; status(id={id}, view=\"screen\") shows its screen"),
        false => String::new(),
    };
    format!(
        "still running in the background: wait(id={id}, since={next}) for more output or its \
         exit; send_input(id={id}) answers a prompt; send_signal(id={id}) stops it{screen}"
    )
}

/// The last line of `output`, the prompt a waiting process printed (shortened).
fn prompt(output: &str) -> Option<String> {
    let line = output
        .trim_end_matches(['\n', '\r'])
        .rsplit('\n')
        .next()?
        .trim_end_matches('\r');
    if line.trim().is_empty() {
        return None;
    }
    let count = line.chars().count();
    Some(match count > 200 {
        true => format!("…{}", line.chars().skip(count - 200).collect::<String>()),
        false => line.to_string(),
    })
}

/// What to call for process `info`, waiting for input after `prompt`.
fn waiting_hint(info: &ProcessInfo, prompt: Option<String>) -> String {
    let id = info.id;
    let after = prompt.map_or(String::new(), |p| format!(" after {p:?}"));
    if info.tty.is_some() {
        // On a terminal, Enter is a key and end of input is C-d, as for a person.
        format!(
            "waiting for input{after}: send_input(id={id}, text=\"...\", keys=[\"Enter\"]) \
             answers it, keys=[\"C-d\"] ends input, keys=[\"C-c\"] interrupts; \
             status(id={id}, view=\"screen\") shows the screen"
        )
    } else if info.kind == ProcKind::InSession {
        // Its stdin is the session shell's: closing it would end the session.
        format!(
            "waiting for input{after}: send_input(id={id}, text=\"...\\n\") answers it; \
             send_signal(id={id}, signal=\"SIGINT\") interrupts it and keeps the session"
        )
    } else {
        format!(
            "waiting for input{after}: send_input(id={id}, text=\"...\\n\") answers it, \
             send_input(id={id}, eof=true) closes stdin; send_signal(id={id}) stops it"
        )
    }
}

/// The bytes for `keys`. A process without a terminal reads lines ending in `\n`, so there
/// Enter is `\n`; on a terminal it is the `\r` a keyboard sends.
fn keys_bytes(keys: &[String], tty: bool) -> Result<Vec<u8>, CallToolResult> {
    let mut out = Vec::new();
    for name in keys {
        let Some(bytes) = key_bytes(name) else {
            return Err(reply::error(
                "BAD_REQUEST",
                &format!("unknown key {name:?}: keys are {KEY_NAMES}"),
            ));
        };
        match (tty, bytes.as_slice()) {
            (false, b"\r") => out.push(b'\n'),
            _ => out.extend(bytes),
        }
    }
    Ok(out)
}

#[tool_router]
impl CubaExec {
    pub fn new(socket: PathBuf) -> CubaExec {
        CubaExec {
            tool_router: Self::tool_router(),
            link: Arc::new(Link::new(socket)),
        }
    }

    /// Output from `since` to the end, as the model sees it, plus the reply's cursors.
    async fn output(
        &self,
        client: &cuba_protocol::client::Client,
        info: &ProcessInfo,
        since: u64,
        max: u64,
        filter: StreamFilter,
        ready: Option<cuba_protocol::OutputRead>,
    ) -> Result<Fetched, ClientError> {
        fetch::output(client, self.link.view(), info, since, max, filter, ready).await
    }

    /// The reply for `info` with its output from `since`.
    async fn process_reply(
        &self,
        client: &cuba_protocol::client::Client,
        info: &ProcessInfo,
        since: u64,
        max: u64,
        filter: StreamFilter,
        ready: Option<cuba_protocol::OutputRead>,
    ) -> Result<ProcessReply, ClientError> {
        let r = self.output(client, info, since, max, filter, ready).await?;
        let mut reply = ProcessReply::from_info(info);
        reply.output = r.text;
        reply.truncated = r.truncated;
        reply.dropped = reply.dropped.max(r.dropped);
        reply.next = r.next;
        let tty = info.tty.is_some();
        if info.state == ProcState::WaitingInput {
            reply.hint = Some(waiting_hint(info, prompt(&reply.output)));
        } else if !info.state.is_finished() {
            reply.hint = Some(running_hint(info.id, reply.next, tty));
        }
        Ok(reply)
    }

    /// The reply for `info` with its terminal screen instead of its output (view="screen").
    /// `Err` is the reply to give instead: no terminal, or the daemon's error.
    async fn screen_reply(
        &self,
        client: &Client,
        info: &ProcessInfo,
    ) -> Result<ProcessReply, CallToolResult> {
        if info.tty.is_none() {
            return Err(no_screen(info.id));
        }
        let view = match client.screen(info.id).await {
            Ok(v) => v,
            Err(e) if e.kind() == Some(ErrorKind::InvalidState) => return Err(no_screen(info.id)),
            Err(e) => return Err(remote(e)),
        };
        let screen = ScreenReply::new(view, |l| self.link.view().redact(l));
        let mut reply = ProcessReply::from_info(info);
        if info.state == ProcState::WaitingInput {
            reply.hint = Some(waiting_hint(info, screen.before_cursor()));
        } else if !info.state.is_finished() {
            reply.hint = Some(running_hint(info.id, reply.next, true));
        }
        reply.screen = Some(screen);
        Ok(reply)
    }

    async fn reply_for(
        &self,
        client: &cuba_protocol::client::Client,
        info: &ProcessInfo,
        since: u64,
        max: u64,
        filter: StreamFilter,
        ready: Option<cuba_protocol::OutputRead>,
    ) -> CallToolResult {
        match self
            .process_reply(client, info, since, max, filter, ready)
            .await
        {
            Ok(reply) => reply.into_result(),
            Err(e) => remote(e),
        }
    }

    #[tool(
        description = "Run a shell command and wait for it. Returns exit code and output. If it is \
                       still running after yield_ms (default 10 s) it keeps running in the \
                       background: the reply has its id, the output so far and a `next` cursor \
                       for wait/status. timeout_ms is a hard limit that stops the whole process \
                       tree.",
        annotations(destructive_hint = true, open_world_hint = true),
        input_schema = crate::args::input_schema::<RunArgs>(),
        output_schema = reply::output_schema::<ProcessReply>()
    )]
    async fn run(
        &self,
        Parameters(a): Parameters<RunArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let tty = match terminal(a.tty, a.cols, a.rows) {
            Ok(t) => t,
            Err(refused) => return Ok(refused),
        };
        let max = crate::fetch::max_output(a.max_output);
        let in_session = a.session.is_some();
        let spawn = SpawnRequest {
            command: a.command,
            cwd: a.cwd.map(Into::into),
            env: env_pairs(a.env, tty.is_some()),
            tty,
            session: a.session,
            shell: a.shell,
            // In a session stdin stays open: later commands read it too.
            close_stdin: a.stdin.is_some() && !in_session,
            stdin: a.stdin.map(String::into_bytes),
            timeout_ms: a.timeout_ms,
            name: a.name,
            side_effects: a.side_effects.unwrap_or_default(),
        };
        // Spawn and wait in one round trip; the wait is the auto-yield.
        let req = RunRequest {
            spawn,
            wait: WaitSpec {
                until: None,
                quiet_ms: None,
                timeout_ms: a.yield_ms.unwrap_or(DEFAULT_YIELD_MS),
                max_bytes: max as u32,
                stream: StreamFilter::Both,
            },
        };
        let spawn = |c: Client| {
            let req = req.clone();
            async move { c.run(req).await }
        };
        let (client, running) = match self.link.with(&ctx, spawn).await {
            Ok(v) => v,
            Err(e) => return Ok(remote(e)),
        };
        let info = running.info.clone();
        match guarded(&ctx, &client, info.id, running.result()).await {
            Guarded::Done(Ok(w)) => {
                let mut process = w.process;
                // The notice is about this call (e.g. a session started again): keep it even
                // if the record no longer carries it.
                if process.notice.is_none() {
                    process.notice = info.notice.clone();
                }
                Ok(self
                    .reply_for(
                        &client,
                        &process,
                        0,
                        max,
                        StreamFilter::Both,
                        Some(w.output),
                    )
                    .await)
            }
            Guarded::Done(Err(e)) => Ok(remote(e)),
            Guarded::Cancelled => {
                // A cancelled synchronous run takes its process tree with it. In a session
                // the daemon makes that an interrupt of the command (SIGINT, SIGKILL after the
                // grace period) and the session stays.
                let stop = SignalRequest {
                    id: info.id,
                    signal: Signal::Term,
                    escalate: true,
                    grace_ms: None,
                    wait: false,
                };
                let _ = client.signal(stop).await;
                Ok(reply::error(
                    "CANCELLED",
                    match info.kind {
                        ProcKind::InSession => {
                            "the request was cancelled; the command was interrupted (the \
                             session stays)"
                        }
                        _ => "the request was cancelled; the command was stopped",
                    },
                ))
            }
        }
    }

    #[tool(
        description = "Start a command in the background and return its id at once (dev servers, \
                       watchers, long builds). Follow it with wait (e.g. until=\"listening\") or \
                       status. With name and ensure=true, an already-running process of that \
                       name and command is returned instead of starting a duplicate.",
        annotations(destructive_hint = true, open_world_hint = true),
        input_schema = crate::args::input_schema::<StartArgs>(),
        output_schema = reply::output_schema::<ProcessReply>()
    )]
    async fn start(
        &self,
        Parameters(a): Parameters<StartArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let tty = match terminal(a.tty, a.cols, a.rows) {
            Ok(t) => t,
            Err(refused) => return Ok(refused),
        };
        let req = SpawnRequest {
            command: a.command,
            cwd: a.cwd.map(Into::into),
            env: env_pairs(a.env, tty.is_some()),
            tty,
            session: a.session,
            shell: a.shell,
            stdin: a.stdin.map(String::into_bytes),
            close_stdin: false,
            timeout_ms: a.timeout_ms,
            name: a.name,
            side_effects: a.side_effects.unwrap_or_default(),
        };
        let ensure = a.ensure == Some(true);
        let start = |c: Client| {
            let req = req.clone();
            async move {
                if ensure {
                    c.ensure(req).await
                } else {
                    c.spawn(req).await.map(|p| (p, false))
                }
            }
        };
        match self.link.with(&ctx, start).await.map(|(_, v)| v) {
            Ok((info, true)) => {
                let mut reply = ProcessReply::from_info(&info);
                reply.existing = Some(true);
                reply.hint = Some(running_hint(info.id, reply.next, info.tty.is_some()));
                Ok(reply.into_result())
            }
            Ok((info, false)) => {
                let mut reply = ProcessReply::from_info(&info);
                if !info.state.is_finished() {
                    let id = info.id;
                    let screen = match info.tty {
                        Some(_) => format!(", status(id={id}, view=\"screen\") to see its screen"),
                        None => String::new(),
                    };
                    reply.hint = Some(format!(
                        "started in the background: wait(id={id}, until=\"<text it prints when \
                         ready>\") or status(id={id}) to read its output{screen}"
                    ));
                }
                Ok(reply.into_result())
            }
            Err(e) => Ok(remote(e)),
        }
    }

    #[tool(
        description = "State, exit code and output of a process. With `since` (a cursor from a \
                       previous reply's `next`) only newer output; without it, the last \
                       tail_bytes (default 4096). view=\"screen\": a tty process's screen.",
        annotations(read_only_hint = true),
        input_schema = crate::args::input_schema::<StatusArgs>(),
        output_schema = reply::output_schema::<ViewReply>()
    )]
    async fn status(
        &self,
        Parameters(a): Parameters<StatusArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let id = a.id;
        let (client, info) = match self
            .link
            .with(&ctx, |c| async move { c.info(id).await })
            .await
        {
            Ok(v) => v,
            Err(e) => return Ok(remote(e)),
        };
        if a.view == Some(ViewArg::Screen) {
            return Ok(match self.screen_reply(&client, &info).await {
                Ok(reply) => reply.into_result(),
                Err(refused) => refused,
            });
        }
        let max = crate::fetch::max_output(a.max_output);
        let since = a.since.unwrap_or_else(|| {
            let tail = a.tail_bytes.unwrap_or(DEFAULT_TAIL).min(max);
            info.total_bytes().saturating_sub(tail)
        });
        Ok(self
            .reply_for(&client, &info, since, max, stream(a.stream), None)
            .await)
    }

    #[tool(
        description = "Wait until a process exits, or its new output matches `until` (a regex), \
                       or it has been quiet for quiet_ms, or timeout_ms passes (default 30 s, at \
                       most 55 s). Returns the output after `since` and the next cursor, or \
                       with view=\"screen\" a tty process's screen. Never stops the process.",
        annotations(read_only_hint = true),
        input_schema = crate::args::input_schema::<WaitArgs>(),
        output_schema = reply::output_schema::<ViewReply>()
    )]
    async fn wait(
        &self,
        Parameters(a): Parameters<WaitArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let id = a.id;
        let client = match self
            .link
            .with(&ctx, |c| async move { c.info(id).await })
            .await
        {
            // Refused before waiting: the wait would end in the same refusal.
            Ok((_, info)) if a.view == Some(ViewArg::Screen) && info.tty.is_none() => {
                return Ok(no_screen(id));
            }
            Ok((c, _)) => c,
            Err(e) => return Ok(remote(e)),
        };
        let screen = a.view == Some(ViewArg::Screen);
        let max = crate::fetch::max_output(a.max_output);
        let since = a.since.unwrap_or(0);
        let filter = stream(a.stream);
        let req = WaitRequest {
            id: a.id,
            since: Some(since),
            spec: WaitSpec {
                until: a.until,
                quiet_ms: a.quiet_ms,
                timeout_ms: a.timeout_ms.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS),
                // The screen replaces the output: no output bytes to carry.
                max_bytes: if screen { 0 } else { max as u32 },
                stream: filter,
            },
        };
        let w = match guarded(&ctx, &client, a.id, client.wait(req)).await {
            Guarded::Done(Ok(w)) => w,
            Guarded::Done(Err(e)) => return Ok(remote(e)),
            Guarded::Cancelled => {
                return Ok(reply::error("CANCELLED", "the wait was cancelled"));
            }
        };
        let mut reply = if screen {
            match self.screen_reply(&client, &w.process).await {
                Ok(r) => r,
                Err(refused) => return Ok(refused),
            }
        } else {
            match self
                .process_reply(&client, &w.process, since, max, filter, Some(w.output))
                .await
            {
                Ok(r) => r,
                Err(e) => return Ok(remote(e)),
            }
        };
        let (reason, matched) = match w.reason {
            WaitReason::Exited => ("exited", None),
            WaitReason::Matched(line) => ("matched", Some(line)),
            WaitReason::Quiet => ("quiet", None),
            WaitReason::Timeout => ("timeout", None),
            WaitReason::WaitingInput => ("waiting_input", None),
        };
        reply.wait = Some(reason.to_string());
        // The matched line is output too: the model sees it through the same view.
        reply.matched = matched.map(|m| self.link.view().render(m.as_bytes()));
        Ok(reply.into_result())
    }

    #[tool(
        description = "Write to a process's stdin: `text` (include \"\\n\" for Enter), then \
                       `keys` such as [\"Enter\"] or [\"C-c\"]; eof=true then closes stdin. \
                       On a tty process keys go through the terminal: C-c interrupts like \
                       Ctrl-C, C-d ends input.",
        annotations(destructive_hint = false),
        input_schema = crate::args::input_schema::<SendInputArgs>(),
        output_schema = reply::output_schema::<ProcessReply>()
    )]
    async fn send_input(
        &self,
        Parameters(a): Parameters<SendInputArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let mut data = a.text.unwrap_or_default().into_bytes();
        let keys = a.keys.unwrap_or_default();
        let eof = a.eof.unwrap_or(false);
        if data.is_empty() && keys.is_empty() && !eof {
            return Ok(reply::error(
                "BAD_REQUEST",
                "pass `text`, `keys` or eof=true (or several of them)",
            ));
        }
        let id = a.id;
        if !keys.is_empty() {
            // What a key sends depends on whether the process has a terminal.
            let tty = match self
                .link
                .with(&ctx, |c| async move { c.info(id).await })
                .await
            {
                Ok((_, info)) => info.tty.is_some(),
                Err(e) => return Ok(remote(e)),
            };
            match keys_bytes(&keys, tty) {
                Ok(bytes) => data.extend(bytes),
                Err(refused) => return Ok(refused),
            }
        }
        let sent = data.len();
        let write = |c: Client| {
            let bytes = data.clone();
            async move { c.stdin(id, bytes, eof).await }
        };
        let client = match self.link.with(&ctx, write).await {
            Ok((c, ())) => c,
            Err(e) => return Ok(remote(e)),
        };
        match client.info(a.id).await {
            Ok(info) => {
                let closed = match (eof, info.tty.is_some()) {
                    (false, _) => "",
                    (true, true) => " and C-d (end of input)",
                    (true, false) => " and closed stdin",
                };
                let mut reply = ProcessReply::from_info(&info);
                reply.hint = Some(format!(
                    "sent {sent} bytes{closed}; wait(id={}, since={}) reads the response",
                    info.id,
                    info.total_bytes()
                ));
                Ok(reply.into_result())
            }
            Err(e) => Ok(remote(e)),
        }
    }

    #[tool(
        description = "Send a signal to a process's whole tree. SIGTERM (default) is graceful: \
                       SIGKILL follows after the grace period if anything is left. Also SIGKILL, \
                       SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT. A command in \
                       a session is interrupted and the session stays; signal the session's own \
                       process to close it.",
        annotations(destructive_hint = true),
        input_schema = crate::args::input_schema::<SendSignalArgs>(),
        output_schema = reply::output_schema::<ProcessReply>()
    )]
    async fn send_signal(
        &self,
        Parameters(a): Parameters<SendSignalArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let signal: Signal = match a.signal.as_deref().unwrap_or("SIGTERM").parse() {
            Ok(s) => s,
            Err(e) => return Ok(reply::error("BAD_REQUEST", &e.to_string())),
        };
        let ends = matches!(
            signal,
            Signal::Term | Signal::Kill | Signal::Int | Signal::Hup
        );
        let req = SignalRequest {
            id: a.id,
            signal,
            escalate: signal == Signal::Term,
            grace_ms: None,
            wait: ends,
        };
        match self
            .link
            .with(&ctx, |c| async move { c.signal(req).await })
            .await
        {
            Ok((_, info)) => {
                let mut reply = ProcessReply::from_info(&info);
                // Stopping on request is what was asked for: not a failure.
                if info.state == ProcState::Killed {
                    reply.code = None;
                    reply.error = None;
                }
                Ok(reply.into_result())
            }
            Err(e) => Ok(remote(e)),
        }
    }

    #[tool(
        description = "The shared process table: every process started by any agent or by a \
                       person (cubactl), with id, state, owner, name, time, output bytes and \
                       command. Filter by state or owner.",
        annotations(read_only_hint = true),
        input_schema = crate::args::input_schema::<ListArgs>(),
        output_schema = reply::output_schema::<ListReply>()
    )]
    async fn list_processes(
        &self,
        Parameters(a): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let state = match a.state.as_deref().map(crate::fetch::parse_state) {
            Some(Err(msg)) => return Ok(reply::error("BAD_REQUEST", &msg)),
            Some(Ok(s)) => Some(s),
            None => None,
        };
        let req = ListRequest {
            state,
            owner: a.owner,
        };
        let list = |c: Client| {
            let req = req.clone();
            async move { c.list(req).await }
        };
        let list = match self.link.with(&ctx, list).await {
            Ok((_, l)) => l,
            Err(e) => return Ok(remote(e)),
        };
        let now = cuba_protocol::now_ms();
        let rows: Vec<ProcessRow> = list.iter().map(|p| ProcessRow::from_info(p, now)).collect();
        let mut text = format!("[processes:{}]", rows.len());
        for r in &rows {
            text.push('\n');
            text.push_str(&r.line());
        }
        Ok(reply::structured(
            text,
            &ListReply { processes: rows },
            false,
        ))
    }
}

const RESOURCE_PREFIX: &str = "cuba://process/";

#[tool_handler]
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
        let client = self
            .link
            .client(&ctx)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let list = client
            .list(ListRequest::default())
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let resources = list
            .iter()
            .map(|p| {
                let label = p.name.clone().unwrap_or_else(|| p.command.clone());
                let label: String = label.chars().take(60).collect();
                Resource::new(
                    format!("{RESOURCE_PREFIX}{}/output", p.id),
                    format!("{}: {label}", p.id),
                )
                .with_mime_type("text/plain")
                .with_description(format!("output of process {} ({})", p.id, p.state))
                .with_size(p.total_bytes())
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let id = request
            .uri
            .strip_prefix(RESOURCE_PREFIX)
            .and_then(|rest| rest.strip_suffix("/output"))
            .and_then(|id| id.parse::<u64>().ok())
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!(
                        "unknown resource {}: expected {RESOURCE_PREFIX}<id>/output",
                        request.uri
                    ),
                    None,
                )
            })?;
        let client = self
            .link
            .client(&ctx)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let info = client
            .info(id)
            .await
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
        let max = crate::fetch::max_output(None);
        let r = self
            .output(&client, &info, 0, max, StreamFilter::Both, None)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(ReadResourceResult::new(vec![ResourceContents::text(r.text, request.uri)]).into())
    }
}
