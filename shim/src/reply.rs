//! Tool replies: a compact text block (one header line, an optional error line, the output) and
//! the same facts as `structuredContent` under a declared output schema.

use cuba_protocol::{ProcState, ProcessInfo};
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Serialize;

/// One process and (some of) its output.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct ProcessReply {
    /// Process id for status, wait, send_input, send_signal.
    pub id: u64,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// ENOENT, EACCES, TIMEOUT, SIGNAL, EXIT, FAILED, LOST when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub time_ms: u64,
    pub bytes: u64,
    /// Cursor: pass as `since` to read only newer output.
    pub next: u64,
    /// Bytes cut from the middle of `output`.
    pub truncated: u64,
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
}

/// A row of `list_processes`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProcessRow {
    pub id: u64,
    pub pid: u32,
    pub owner: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    pub time_ms: u64,
    pub bytes: u64,
    /// The command, shortened.
    pub command: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListReply {
    pub processes: Vec<ProcessRow>,
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The error code and explanation for a process that did not succeed; `None` when it did (or
/// is still running, or was stopped on request).
pub fn failure(info: &ProcessInfo) -> Option<(&'static str, String)> {
    let id = info.id;
    match info.state {
        ProcState::Exited => match info.exit_code {
            Some(0) | None => None,
            Some(127) => Some((
                "ENOENT",
                "command not found (exit 127): check the program name, install it, or fix PATH"
                    .into(),
            )),
            Some(126) => Some((
                "EACCES",
                "permission denied or not executable (exit 126): check the file's mode \
                 (chmod +x) or run it through its interpreter"
                    .into(),
            )),
            Some(code) => Some(("EXIT", format!("the command failed with exit code {code}"))),
        },
        ProcState::TimedOut => Some((
            "TIMEOUT",
            format!(
                "stopped after its timeout_ms={}: raise timeout_ms, or use start and wait for \
                 long-running commands",
                info.timeout_ms.unwrap_or(0)
            ),
        )),
        ProcState::Signaled => Some((
            "SIGNAL",
            format!(
                "ended by {}",
                info.signal.map_or("a signal".into(), |s| s.to_string())
            ),
        )),
        ProcState::FailedToStart => {
            let why = info.error.clone().unwrap_or_default();
            let code = if why.contains("os error 2") {
                "ENOENT"
            } else if why.contains("os error 13") {
                "EACCES"
            } else {
                "FAILED"
            };
            Some((code, format!("process {id} could not start: {why}")))
        }
        ProcState::Lost => Some((
            "LOST",
            info.error
                .clone()
                .unwrap_or_else(|| "the daemon restarted while it ran".into()),
        )),
        ProcState::Running | ProcState::WaitingInput | ProcState::Killed => None,
    }
}

impl ProcessReply {
    /// The row's facts; output fields are filled in by the caller.
    pub fn from_info(info: &ProcessInfo) -> ProcessReply {
        let (code, error) = match failure(info) {
            Some((c, e)) => (Some(c.to_string()), Some(e)),
            None => (None, None),
        };
        ProcessReply {
            id: info.id,
            pid: info.pid,
            name: info.name.clone(),
            state: info.state.to_string(),
            exit_code: info.exit_code,
            signal: info.signal.map(|s| s.to_string()),
            code,
            time_ms: info.elapsed_ms(now_ms()),
            bytes: info.total_bytes(),
            next: info.total_bytes(),
            dropped: info.dropped_bytes,
            error,
            ..ProcessReply::default()
        }
    }

    fn header(&self) -> String {
        let mut h = format!("[id:{}", self.id);
        match (self.state.as_str(), self.exit_code, &self.signal) {
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
        h.push_str(&format!(" time:{}ms bytes:{}", self.time_ms, self.bytes));
        if self.truncated > 0 {
            h.push_str(&format!(" trunc:{}", self.truncated));
        } else {
            h.push_str(" trunc:no");
        }
        if self.dropped > 0 {
            h.push_str(&format!(" dropped:{}", self.dropped));
        }
        h.push_str(&format!(" next:{}", self.next));
        if let Some(w) = &self.wait {
            h.push_str(&format!(" wait:{w}"));
        }
        if self.existing == Some(true) {
            h.push_str(" existing:yes");
        }
        h.push(']');
        h
    }

    /// Text block + structured content. `is_error` for failures (nonzero exit, timeout, …).
    pub fn into_result(self) -> CallToolResult {
        let mut text = self.header();
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
        if !self.output.is_empty() {
            text.push('\n');
            text.push_str(&self.output);
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
pub fn error(code: &str, message: &str) -> CallToolResult {
    let reply = ProcessReply {
        code: Some(code.to_string()),
        error: Some(message.to_string()),
        state: "error".into(),
        ..ProcessReply::default()
    };
    structured(format!("{code}: {message}"), &reply, true)
}

impl ProcessRow {
    pub fn from_info(info: &ProcessInfo, now: u64) -> ProcessRow {
        let mut command: String = info.command.replace('\n', " ").chars().take(80).collect();
        if info.command.chars().count() > 80 {
            command.push('…');
        }
        ProcessRow {
            id: info.id,
            pid: info.pid,
            owner: info.owner.name.clone(),
            name: info.name.clone(),
            state: info.state.to_string(),
            exit_code: info.exit_code,
            signal: info.signal.map(|s| s.to_string()),
            time_ms: info.elapsed_ms(now),
            bytes: info.total_bytes(),
            command,
        }
    }

    pub fn line(&self) -> String {
        let mut l = format!("id:{} pid:{} {}", self.id, self.pid, self.state);
        if let Some(c) = self.exit_code {
            l.push_str(&format!(" exit:{c}"));
        }
        if let Some(s) = &self.signal {
            l.push_str(&format!(" signal:{s}"));
        }
        l.push_str(&format!(
            " time:{}ms bytes:{} owner:{}",
            self.time_ms, self.bytes, self.owner
        ));
        if let Some(n) = &self.name {
            l.push_str(&format!(" name:{n}"));
        }
        l.push_str(" $ ");
        l.push_str(&self.command);
        l
    }
}
