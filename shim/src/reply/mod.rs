//! Tool replies: a compact text block (one header line, an optional error line, the output) and
//! the same facts as `structuredContent` under a declared output schema.

use cuba_protocol::{ProcKind, ProcessInfo};
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{failure, Failure};

mod errors;
mod group;
mod list;
mod screen;

pub use errors::ErrorsReply;
pub use group::{group_result, GroupFacts, HostOutcome};
pub use list::{HostError, ListReply, ProcessRow};
pub use screen::{ScreenReply, TtyReply};

// What a reply and a row of `list_processes` both say about a process. Flattened into both:
// the JSON has these fields at the top level. (`id` and `pid` lead each struct, documented
// for its own tool.)
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct ProcessFacts {
    /// The host it runs on; absent for this machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// "session" (a session's shell) or "in_session" (a command in one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tty: Option<TtyReply>,
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    // In no schema, like pid: output schemas declare what a client acts on (id, state, next,
    // output), and every other field is in docs/tools.md (tools/list is paid in every turn).
    #[schemars(skip)]
    pub time_ms: u64,
    #[schemars(skip)]
    pub bytes: u64,
    /// The spool stopped (a full disk): why, and the bytes not kept on disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spool: Option<String>,
    /// CPU time and memory (now; the peak once ended) of its tree, where its cgroup tells. In no
    /// schema: every turn would pay for them (the tools/list budget); docs/tools.md names them.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_bytes: Option<u64>,
    /// The kernel refused forks at the tree's pids cap: how many, and the cap (in no schema,
    /// like the figures above).
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<String>,
    /// Programs its tree tried to run that the daemon refused at their exec: one line each,
    /// `BLOCKED: PROGRAM (argv) at exec, rule RULE: why` (in no schema, like the figures).
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<String>,
    /// The TCP port leased to it (`start` with `port`), its `PORT` (in no schema, like the
    /// figures).
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Its agent's budget was reached while it ran: a sentence (in no schema, like the figures).
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
}

impl ProcessFacts {
    /// `info`'s facts, its time measured up to `now`.
    pub(crate) fn of(info: &ProcessInfo, now: u64) -> ProcessFacts {
        ProcessFacts {
            host: None,
            name: info.name.clone(),
            kind: kind(info),
            session: info.session.clone(),
            tty: info.tty.map(TtyReply::from),
            state: info.state.to_string(),
            exit_code: info.exit_code,
            signal: info.signal.map(|s| s.to_string()),
            time_ms: info.elapsed_ms(now),
            bytes: info.total_bytes(),
            spool: info.spool.clone(),
            cpu_ms: info.cpu_ms,
            // Now while it runs; the peak once it ended.
            mem_bytes: info
                .memory_peak_bytes
                .filter(|_| info.state.is_finished())
                .or(info.memory_bytes),
            pids: info.refused_forks(),
            blocked: info.blocked_lines(),
            port: info.port,
            budget: info.budget_hit.clone(),
        }
    }

    /// ` kind:session session:dev`, ` session:dev`, ` tty:120x40`: what a header or a table
    /// line says about where a process runs (nothing for a plain command on pipes).
    pub(crate) fn where_tokens(&self) -> String {
        let mut t = String::new();
        if let Some(h) = &self.host {
            t.push_str(&format!(" host:{h}"));
        }
        if self.kind.as_deref() == Some(ProcKind::Session.as_str()) {
            t.push_str(" kind:session");
        }
        if let Some(s) = &self.session {
            t.push_str(&format!(" session:{s}"));
        }
        if let Some(TtyReply { cols, rows }) = self.tty {
            t.push_str(&format!(" tty:{cols}x{rows}"));
        }
        if let Some(port) = self.port {
            t.push_str(&format!(" port:{port}"));
        }
        t
    }
}

/// The kind of a record, for replies: `None` for a plain command (the common case says nothing).
fn kind(info: &ProcessInfo) -> Option<String> {
    match info.kind {
        ProcKind::Command => None,
        k => Some(k.as_str().to_string()),
    }
}

/// One process and (some of) its output.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct ProcessReply {
    /// Process id for status, wait, send_input, send_signal.
    pub id: u64,
    #[schemars(skip)]
    pub pid: u32,
    #[serde(flatten)]
    pub facts: ProcessFacts,
    /// ENOENT, EACCES, TIMEOUT, SIGNAL, EXIT, FAILED, LOST when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Cursor: pass as `since` to read only newer output.
    pub next: u64,
    /// Bytes cut from the middle of `output`; absent when none were.
    #[serde(skip_serializing_if = "is_zero")]
    pub truncated: u64,
    /// Bytes of output no longer kept anywhere; absent when none were lost.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped: u64,
    pub output: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// The first and last error lines, when the output was cut (in no schema, like `pid`).
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<ErrorsReply>,
    /// Declared only in the schemas of status and wait (`ViewReply`), the tools that fill it.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screen: Option<ScreenReply>,
    /// The process has ended (no more output will come).
    #[serde(skip)]
    #[schemars(skip)]
    pub finished: bool,
    /// `output` is all the process wrote, from its first byte, nothing cut: a cursor would
    /// read nothing more.
    #[serde(skip)]
    #[schemars(skip)]
    pub whole: bool,
}

/// A finished command's time is in its header from this long on.
const SHOWN_TIME_MS: u64 = 1000;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The output schema of status and wait: a process reply, plus the screen with view="screen".
#[derive(JsonSchema)]
#[expect(
    dead_code,
    reason = "only its schema is used; replies are ProcessReply"
)]
pub struct ViewReply {
    #[serde(flatten)]
    reply: ProcessReply,
    #[serde(skip_serializing_if = "Option::is_none")]
    screen: Option<ScreenReply>,
}

/// `host` as replies name it: `None` for this machine.
pub fn host_name(host: Option<&str>) -> Option<String> {
    host.filter(|h| !cuba_protocol::hosts::is_local(Some(h)))
        .map(String::from)
}

impl ProcessReply {
    /// The reply names `host` (when it is not this machine).
    pub fn on(mut self, host: Option<&str>) -> ProcessReply {
        self.facts.host = host_name(host);
        self
    }

    /// The row's facts; output fields are filled in by the caller.
    pub fn from_info(info: &ProcessInfo) -> ProcessReply {
        let (code, error) = match failure(info) {
            Some(f) => (Some(f.code.to_string()), Some(f.message)),
            None => (None, None),
        };
        ProcessReply {
            id: info.id,
            pid: info.pid,
            facts: ProcessFacts::of(info, cuba_protocol::now_ms()),
            notice: info.notice.clone(),
            code,
            next: info.total_bytes(),
            dropped: info.dropped_bytes,
            error,
            finished: info.state.is_finished(),
            ..ProcessReply::default()
        }
    }

    /// A finished process shown whole needs no cursor, no byte count and no cut report: its
    /// header says what it did and nothing a later call could use (every client's model pays
    /// for each character, and some add dozens of their own).
    fn settled(&self) -> bool {
        self.finished
            && self.whole
            && self.truncated == 0
            && self.dropped == 0
            && self.screen.is_none()
    }

    fn header(&self) -> String {
        let f = &self.facts;
        let mut h = format!("[id:{}", self.id);
        h.push_str(&f.where_tokens());
        match (f.state.as_str(), f.exit_code, &f.signal) {
            ("exited", Some(code), _) => h.push_str(&format!(" exit:{code}")),
            ("signaled", _, Some(sig)) => h.push_str(&format!(" signal:{sig}")),
            (state, _, sig) => {
                h.push_str(&format!(" state:{state}"));
                if let Some(sig) = sig {
                    h.push_str(&format!(" signal:{sig}"));
                }
            }
        }
        if let Some(code) = &self.code {
            h.push_str(&format!(" error:{code}"));
        }
        // A quick command's time says nothing; a long or running one's does.
        if !self.finished || f.time_ms >= SHOWN_TIME_MS {
            h.push_str(&format!(" time:{}ms", f.time_ms));
        }
        if !self.settled() {
            h.push_str(&format!(" bytes:{}", f.bytes));
            if self.truncated > 0 {
                h.push_str(&format!(" trunc:{}", self.truncated));
            }
            if self.dropped > 0 {
                h.push_str(&format!(" dropped:{}", self.dropped));
            }
            h.push_str(&format!(" next:{}", self.next));
            if let Some(e) = &self.errors {
                h.push_str(&e.tokens());
            }
        }
        if let Some(w) = &self.wait {
            h.push_str(&format!(" wait:{w}"));
        }
        if self.existing == Some(true) {
            h.push_str(" existing:yes");
        }
        if let Some(screen) = &self.screen {
            let [row, col] = screen.cursor;
            h.push_str(&format!(" view:screen cursor:{row},{col}"));
            if screen.alternate {
                h.push_str(" alternate:yes");
            }
        }
        h.push(']');
        h
    }

    /// Text block + structured content. `is_error` for failures (nonzero exit, timeout, …).
    pub fn into_result(mut self) -> CallToolResult {
        if let (Some(h), Some(hint)) = (&self.facts.host, &self.hint) {
            // The calls a hint suggests must reach the same host.
            self.hint = Some(hint.replace("(id=", &format!("(host={h:?}, id=")));
        }
        let mut text = self.header();
        if let Some(n) = &self.notice {
            text.push_str("\nnotice: ");
            text.push_str(n);
        }
        if let Some(n) = &self.facts.spool {
            // Already a sentence: "spool stopped: no space left on device; …".
            text.push('\n');
            text.push_str(n);
        }
        if let Some(p) = &self.facts.pids {
            text.push('\n');
            text.push_str(p);
        }
        if let Some(b) = &self.facts.budget {
            text.push_str("\nbudget: ");
            text.push_str(b);
        }
        for b in &self.facts.blocked {
            text.push('\n');
            text.push_str(b);
        }
        if let Some(e) = &self.error {
            text.push('\n');
            text.push_str(self.code.as_deref().unwrap_or("ERROR"));
            text.push_str(": ");
            text.push_str(e);
        }
        if let Some(m) = &self.matched {
            text.push_str("\nmatched: ");
            text.push_str(m);
        }
        if let Some(h) = &self.hint {
            text.push('\n');
            text.push_str(h);
        }
        let body = match &self.screen {
            Some(screen) => screen.text(),
            None => self.output.clone(),
        };
        if !body.is_empty() {
            text.push('\n');
            text.push_str(&body);
        }
        let is_error = self.code.is_some();
        structured(text, &self, is_error)
    }
}

/// A result with `text` as content and `value` as structured content.
pub fn structured(text: String, value: &impl Serialize, is_error: bool) -> CallToolResult {
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = serde_json::to_value(value).ok();
    result
}

/// A tool-level error the model should see: the code, what happened, what to do.
impl From<Failure> for CallToolResult {
    fn from(f: Failure) -> CallToolResult {
        let text = format!("{}: {}", f.code, f.message);
        let reply = ProcessReply {
            code: Some(f.code.to_string()),
            error: Some(f.message),
            facts: ProcessFacts {
                state: "error".into(),
                ..ProcessFacts::default()
            },
            ..ProcessReply::default()
        };
        structured(text, &reply, true)
    }
}

#[cfg(test)]
mod tests {
    use cuba_protocol::{ClientKind, Owner, ProcState};
    use serde_json::json;

    use super::*;

    fn info() -> ProcessInfo {
        ProcessInfo {
            id: 4,
            pid: 321,
            owner: Owner {
                kind: ClientKind::Mcp,
                name: "agent".into(),
                pid: 9,
            },
            name: Some("web".into()),
            command: "exit 3".into(),
            cwd: "/".into(),
            state: ProcState::Exited,
            exit_code: Some(3),
            signal: None,
            error: None,
            started_at_ms: 1_000,
            ended_at_ms: Some(1_250),
            timeout_ms: None,
            stdout_bytes: 5,
            stderr_bytes: 2,
            dropped_bytes: 0,
            kind: ProcKind::InSession,
            tty: None,
            session: Some("dev".into()),
            notice: None,
            spool: None,
            cpu_ms: None,
            memory_bytes: None,
            memory_peak_bytes: None,
            pids_max: None,
            forks_refused: None,
            cpu_millicores: None,
            port: None,
            blocked: Vec::new(),
            failure: None,
            asks: Vec::new(),
            errors: None,
            budget: None,
            budget_hit: None,
        }
    }

    #[test]
    fn refused_forks_are_a_line_of_the_reply() {
        let mut i = info();
        i.pids_max = Some(64);
        i.forks_refused = Some(37);
        let reply = ProcessReply::from_info(&i).into_result();
        let text = serde_json::to_string(&reply.content).unwrap_or_default();
        assert!(
            text.contains("\\nthe kernel refused 37 forks at its pids cap (pids_max 64)"),
            "{text}"
        );
        i.forks_refused = Some(0);
        let text = serde_json::to_string(&ProcessReply::from_info(&i).into_result().content);
        assert!(!text.unwrap_or_default().contains("refused"));
    }

    // The structured content clients parse: the same keys as before the facts were shared.
    #[test]
    fn a_reply_and_a_row_keep_their_json() {
        let reply = ProcessReply::from_info(&info()).into_result();
        assert_eq!(
            reply.structured_content,
            Some(json!({
                "id": 4, "pid": 321, "name": "web", "kind": "in_session", "session": "dev",
                "state": "exited", "exit_code": 3, "code": "EXIT", "time_ms": 250, "bytes": 7,
                "next": 7, "output": "",
                "error": "the command failed with exit code 3",
            }))
        );
        let row = ProcessRow::from_info(&info(), 5_000);
        assert_eq!(
            serde_json::to_value(&row).ok(),
            Some(json!({
                "id": 4, "pid": 321, "owner": "agent", "name": "web", "kind": "in_session",
                "session": "dev", "state": "exited", "exit_code": 3, "time_ms": 250,
                "bytes": 7, "command": "exit 3",
            }))
        );
        assert_eq!(
            row.line(),
            "id:4 pid:321 session:dev exited exit:3 time:250ms bytes:7 owner:agent name:web \
             $ exit 3"
        );
    }

    #[test]
    fn a_stopped_spool_is_told_in_the_reply_and_the_row() {
        let mut i = info();
        let spool = "spool stopped: no space left on device; 9 bytes not kept on disk";
        i.spool = Some(spool.into());
        let reply = ProcessReply::from_info(&i).into_result();
        let content = reply.structured_content.unwrap_or_default();
        assert_eq!(content["spool"], spool);
        let text = format!("{:?}", reply.content);
        assert!(text.contains(spool), "{text}");
        let row = ProcessRow::from_info(&i, 5_000);
        assert!(
            row.line().contains(&format!(" [{spool}] $ exit 3")),
            "{}",
            row.line()
        );
    }

    #[test]
    fn a_failure_is_an_error_reply() {
        let r = CallToolResult::from(Failure::bad_request("no"));
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.structured_content,
            Some(json!({
                "id": 0, "pid": 0, "state": "error", "code": "BAD_REQUEST", "time_ms": 0,
                "bytes": 0, "next": 0, "output": "",
                "error": "no",
            }))
        );
    }
}
