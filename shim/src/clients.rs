//! What each known MCP client does with a tool result, and the reply shape chosen for it, so
//! the model reads our compact view on every client (docs/clients.md has the measurements,
//! docs/decisions.md the why).
//!
//! Some clients hand the model `JSON.stringify(structuredContent)` in place of our text (Claude
//! Code, Codex) or after it (Copilot CLI); those get text only, and tools/list declares no
//! output schema to them (a declared schema obliges structured content). Others show the text
//! and leave structured content to programs, which keep it. `CUBA_EXEC_STRUCTURED` (or `structured` in config.toml)
//! overrides the choice: `auto` (the default), `always`, `never`.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, JsonObject, Tool};

/// The setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Structured {
    #[default]
    Auto,
    Always,
    Never,
}

impl Structured {
    pub fn parse(text: &str) -> Result<Structured, String> {
        match text.trim() {
            "auto" | "" => Ok(Structured::Auto),
            "always" => Ok(Structured::Always),
            "never" => Ok(Structured::Never),
            other => Err(format!(
                "structured must be auto, always or never, not {other:?}"
            )),
        }
    }
}

/// How replies are shaped for one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Structured content in results and output schemas in tools/list.
    pub structured: bool,
    /// Failures carry `isError`. Gemini CLI shows the model a JSON dump of the whole result in
    /// place of the text of one that does: it gets none, and reads the failure in the header
    /// and the error line like every other client.
    pub error_flag: bool,
    /// Each tool carries the words a user would search for it by
    /// (`_meta["anthropic/searchHint"]`), for a client that defers tools behind a search and
    /// reads them. Only there: every byte of tools/list is paid in every turn.
    pub search_hints: bool,
    /// The default output bound of a reply, for a client that cuts results smaller than ours
    /// (the setting, when made, still holds).
    pub max_output: Option<u64>,
    /// The most one result may take as JSON: [`EVENT_BUDGET`], or less for a client that cuts
    /// the JSON of a result it hands the model, and why, for the marker of a cut.
    pub budget: (usize, &'static str),
}

/// `clientInfo.name`s of clients that show structured content to the model in place of the
/// text, before it or beside it (measured: docs/clients.md). A name ending in `*` is a prefix:
/// Qwen Code's name ends with the key of the server's entry.
const SHOW_STRUCTURED: &[&str] = &[
    "claude-code",
    "codex-mcp-client",
    "copilot-cli",
    "qwen-cli-mcp-client-*",
    "@cline/core",
];

/// `clientInfo.name`s of clients whose tool search reads `_meta["anthropic/searchHint"]`.
const READ_SEARCH_HINTS: &[&str] = &["claude-code"];

/// The words each tool is found by beside its name and description: what a user types when
/// they want it, in the plain words of a request ("kill process", "background process").
const SEARCH_HINTS: &[(&str, &str)] = &[
    ("run", "run shell command execute bash script terminal"),
    (
        "start",
        "background process long-running server dev server daemon watch start",
    ),
    ("status", "process status output logs progress check"),
    ("wait", "wait for process finish output until pattern"),
    (
        "send_input",
        "send input stdin type keys answer prompt interactive",
    ),
    (
        "send_signal",
        "kill process stop terminate interrupt signal ctrl-c",
    ),
    ("list_processes", "list processes running jobs ps"),
    ("list_hosts", "remote hosts ssh machines servers"),
];

/// `clientInfo.name`s of clients that show the model a dump of a result marked `isError`
/// (Cline shows every result as JSON; the flag would only add to it).
const DUMP_ERRORS: &[&str] = &[
    "gemini-cli-mcp-client",
    "qwen-cli-mcp-client-*",
    "@cline/core",
];

/// Clients that cut a result smaller than our default view, and the default bound that keeps
/// our head, cut marker and tail inside what they hand the model: Cline cuts the middle out of
/// any result over 8 000 characters, and the JSON it makes of ours escapes every newline, tab
/// and quote.
const SMALLER_OUTPUT: &[(&str, u64)] = &[("@cline/core", 6 * 1024)];

/// Clients that hand the model the JSON of a result and cut it past a length of their own, the
/// length our result keeps within, and the words that say so in the marker of our cut: output
/// that escapes heavily (quotes, backslashes) loses its middle to our marker, not to theirs.
const SMALLER_RESULT: &[(&str, usize, &str)] = &[(
    "@cline/core",
    8_000,
    "within the 8 000 characters Cline hands the model",
)];

/// Why [`EVENT_BUDGET`] bounds a result, for the marker of a cut.
const EVENT_WHY: &str = "within the 1 MiB a transport message may carry";

/// `client` is one of `names` (a name ending in `*` is a prefix).
fn listed(names: &[&str], client: Option<&str>) -> bool {
    client.is_some_and(|c| {
        names.iter().any(|n| match n.strip_suffix('*') {
            Some(prefix) => c.starts_with(prefix),
            None => c == *n,
        })
    })
}

impl Shape {
    pub fn for_client(setting: Structured, client: Option<&str>) -> Shape {
        let structured = match setting {
            Structured::Always => true,
            Structured::Never => false,
            Structured::Auto => !listed(SHOW_STRUCTURED, client),
        };
        Shape {
            structured,
            error_flag: !listed(DUMP_ERRORS, client),
            search_hints: listed(READ_SEARCH_HINTS, client),
            max_output: SMALLER_OUTPUT
                .iter()
                .find(|(name, _)| client == Some(*name))
                .map(|(_, bound)| *bound),
            budget: SMALLER_RESULT
                .iter()
                .find(|(name, _, _)| client == Some(*name))
                .map_or((EVENT_BUDGET, EVENT_WHY), |(_, n, why)| (*n, *why)),
        }
    }

    /// `result` as this client should receive it.
    pub fn apply(self, result: &mut CallToolResult) {
        if !self.structured {
            result.structured_content = None;
        }
        if !self.error_flag {
            result.is_error = None;
        }
    }

    /// `result` as this client should receive it, and within its budget (`fit`).
    pub fn shape(self, result: &mut CallToolResult) {
        self.apply(result);
        fit(result, self.budget);
    }

    /// `tools` as this client should see them.
    pub fn tools(self, mut tools: Vec<Tool>) -> Vec<Tool> {
        if !self.structured {
            for t in &mut tools {
                t.output_schema = None;
            }
        }
        if self.search_hints {
            for t in &mut tools {
                let hint = SEARCH_HINTS.iter().find(|(name, _)| *name == t.name);
                if let Some((_, hint)) = hint {
                    let mut meta = t.meta.take().unwrap_or_default();
                    meta.0.insert("anthropic/searchHint".into(), (*hint).into());
                    t.meta = Some(meta);
                }
            }
        }
        tools
    }
}

/// The most one result may take as JSON: a transport carries it as one message (an SSE event
/// over HTTP, a line over stdio), and the official SDKs refuse an event over 1 MiB; the rest is
/// room for the JSON-RPC envelope and the event's framing.
pub const EVENT_BUDGET: usize = 1024 * 1024 - 64 * 1024;

/// Bounds `result` to `budget` bytes as JSON. The output is sent once: when text and
/// structured content together would pass it, `structuredContent.output` is emptied and
/// `output_omitted` says how many bytes the text block carries instead; if the text alone still
/// passes it (output escaped heavily in JSON), its middle is cut, with a marker saying so and
/// why (`budget.1`).
pub fn fit(result: &mut CallToolResult, (budget, why): (usize, &str)) {
    let text_len: usize = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.len())
        .sum();
    let structured_output = result
        .structured_content
        .as_ref()
        .and_then(|v| v.get("output"))
        .and_then(|o| o.as_str())
        .map_or(0, str::len);
    // Escaping at most doubles plain text; a reply this small fits whatever it holds… almost
    // (a `\u00XX` is six bytes): only measure those that might not.
    if (text_len + structured_output) * 2 < budget / 2 {
        return;
    }
    let size = |r: &CallToolResult| serde_json::to_string(r).map_or(usize::MAX, |s| s.len());
    if size(result) <= budget {
        return;
    }
    if let Some(serde_json::Value::Object(o)) = &mut result.structured_content {
        if let Some(serde_json::Value::String(out)) = o.get_mut("output") {
            let n = out.len();
            if n > 0 {
                out.clear();
                o.insert("output_omitted".into(), n.into());
            }
        }
    }
    for _ in 0..4 {
        let now = size(result);
        if now <= budget {
            return;
        }
        let Some(rmcp::model::ContentBlock::Text(t)) = result
            .content
            .iter_mut()
            .max_by_key(|c| c.as_text().map_or(0, |t| t.text.len()))
        else {
            return;
        };
        let escaped = serde_json::to_string(&t.text).map_or(t.text.len(), |s| s.len());
        // Raw bytes to cut for `now - budget` escaped ones, with room for the marker.
        let over = now - budget + 256;
        let cut = (over as u128 * t.text.len() as u128 / escaped.max(1) as u128) as usize + 1;
        cut_middle(&mut t.text, cut, why);
    }
}

/// `text` with `cut` bytes taken from its middle, a quarter of what stays before the cut and
/// three quarters after (as the output's own cut), and a line saying so.
fn cut_middle(text: &mut String, cut: usize, why: &str) {
    let len = text.len();
    let keep = len.saturating_sub(cut);
    let mut start = keep / 4;
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (len - (keep - keep / 4)).max(start);
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let marker = format!(
        "\n[… {} bytes cut here to keep this reply {why}; status with since/tail_bytes reads \
         them …]\n",
        end - start
    );
    text.replace_range(start..end, &marker);
}

/// What a reply adds to its output at most (header, error, hint and notice lines, the cut
/// marker), for the size a client is told to expect.
const REPLY_OVERHEAD: u64 = 2048;

/// Above the default output bound, each tool declares the largest reply it sends
/// (`_meta["anthropic/maxResultSizeChars"]`): Claude Code persists a larger result to a file
/// and shows the model a preview of its head, unless the tool declares more. UTF-8 output has
/// no more characters than bytes, so the byte bound bounds the characters too.
pub fn declare_result_size<S>(router: &mut ToolRouter<S>, max_output: u64) {
    if max_output <= crate::fetch::DEFAULT_MAX_OUTPUT {
        return;
    }
    let chars = max_output + REPLY_OVERHEAD;
    for route in router.map.values_mut() {
        let mut meta = route.attr.meta.take().unwrap_or_default();
        meta.0
            .insert("anthropic/maxResultSizeChars".into(), chars.into());
        route.attr.meta = Some(meta);
    }
}

/// Arguments clients add to every tool's call of their own accord (Gemini CLI's
/// `wait_for_previous`, its scheduling flag, passed through to the server). They mean nothing
/// to a command; dropped before the arguments are read, so they never fail a call, while an
/// argument the model made up is still refused with the valid names.
const CLIENT_ARGS: &[&str] = &["wait_for_previous"];

pub fn drop_client_args(args: &mut Option<JsonObject>) {
    if let Some(a) = args {
        for name in CLIENT_ARGS {
            a.remove(*name);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn big(text: String, output: String) -> CallToolResult {
        let mut r = CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)]);
        r.structured_content = Some(serde_json::json!({"id": 1, "output": output}));
        r
    }

    #[test]
    fn a_large_reply_sends_its_output_once_and_fits_one_event() {
        let out = "line of output\n".repeat(60_000);
        let mut r = big(format!("[id:1 exit:0]\n{out}"), out.clone());
        fit(&mut r, (EVENT_BUDGET, EVENT_WHY));
        let s = r.structured_content.as_ref().unwrap();
        assert_eq!(s["output"], "");
        assert_eq!(s["output_omitted"], out.len());
        assert!(serde_json::to_string(&r).unwrap().len() <= EVENT_BUDGET);
        assert!(r.content[0].as_text().unwrap().text.ends_with(&out));

        // Control bytes escape to six: the text's middle goes, head and tail stay.
        let noisy = "\u{1}".repeat(1024 * 1024 - 64);
        let mut r = big(format!("[id:2 exit:0]\n{noisy}END"), String::new());
        fit(&mut r, (EVENT_BUDGET, EVENT_WHY));
        assert!(serde_json::to_string(&r).unwrap().len() <= EVENT_BUDGET);
        let text = &r.content[0].as_text().unwrap().text;
        assert!(text.starts_with("[id:2 exit:0]") && text.ends_with("END"));
        assert!(text.contains("bytes cut here"), "{}", &text[..100]);

        // Small replies are left as they are.
        let mut r = big("[id:3 exit:0]\nhi".into(), "hi".into());
        fit(&mut r, (EVENT_BUDGET, EVENT_WHY));
        assert_eq!(r.structured_content.unwrap()["output"], "hi");
    }

    #[test]
    fn a_reply_cline_would_cut_is_cut_by_us_with_head_and_tail() {
        let cline = Shape::for_client(Structured::Auto, Some("@cline/core"));
        // Quotes and backslashes grow in JSON: 7 KiB of such lines pass Cline's 8 000 characters.
        let out = "\"quoted\" \\back\n".repeat(450);
        let mut r = big(format!("[id:4 exit:0]\n{out}END\n"), out.clone());
        cline.shape(&mut r);
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.len() <= 8_000, "{}", json.len());
        let text = &r.content[0].as_text().unwrap().text;
        assert!(text.starts_with("[id:4 exit:0]\n\"quoted\"") && text.ends_with("END\n"));
        assert!(
            text.contains("within the 8 000 characters Cline hands the model"),
            "{text}"
        );
        // One that fits is left whole.
        let mut r = big("[id:5 exit:0]\nhi\n".into(), "hi\n".into());
        cline.shape(&mut r);
        assert_eq!(r.content[0].as_text().unwrap().text, "[id:5 exit:0]\nhi\n");
    }

    #[test]
    fn the_setting_reads_its_three_words_and_refuses_others() {
        assert_eq!(Structured::parse("never"), Ok(Structured::Never));
        assert_eq!(Structured::parse(" always "), Ok(Structured::Always));
        assert_eq!(Structured::parse("auto"), Ok(Structured::Auto));
        assert!(Structured::parse("yes").is_err());
    }

    #[test]
    fn clients_that_show_structured_content_get_text_only_unless_told() {
        let auto = |c| Shape::for_client(Structured::Auto, c).structured;
        assert!(!auto(Some("claude-code")));
        assert!(!auto(Some("codex-mcp-client")));
        assert!(auto(Some("opencode")));
        assert!(auto(Some("some-sdk-program")));
        assert!(auto(None));
        assert!(Shape::for_client(Structured::Always, Some("claude-code")).structured);
        assert!(!Shape::for_client(Structured::Never, Some("opencode")).structured);
    }

    #[test]
    fn qwen_code_is_known_by_its_prefix_and_cline_by_its_name() {
        let qwen = Shape::for_client(Structured::Auto, Some("qwen-cli-mcp-client-my-shell"));
        assert!(!qwen.structured && !qwen.error_flag && qwen.max_output.is_none());
        let cline = Shape::for_client(Structured::Auto, Some("@cline/core"));
        assert!(!cline.structured && !cline.error_flag);
        assert_eq!(cline.max_output, Some(6 * 1024));
        assert_eq!(cline.budget.0, 8_000);
        // A prefix entry is not a name of its own, and a name is not a prefix.
        let other = Shape::for_client(Structured::Auto, Some("qwen-cli-mcp-client"));
        assert!(other.structured && other.error_flag);
        assert!(Shape::for_client(Structured::Auto, Some("@cline/core2")).structured);
    }

    #[test]
    fn a_client_that_dumps_error_results_gets_failures_unflagged() {
        let mut r = CallToolResult::error(vec![rmcp::model::ContentBlock::text("[id:1 exit:3]")]);
        Shape::for_client(Structured::Auto, Some("gemini-cli-mcp-client")).apply(&mut r);
        assert_eq!(r.is_error, None);
        let mut r = CallToolResult::error(vec![rmcp::model::ContentBlock::text("[id:1 exit:3]")]);
        Shape::for_client(Structured::Auto, Some("claude-code")).apply(&mut r);
        assert_eq!(r.is_error, Some(true));
    }

    #[test]
    fn only_the_arguments_clients_add_are_dropped() {
        let mut args = serde_json::json!({"command": "ls", "wait_for_previous": true, "colour": 1})
            .as_object()
            .cloned();
        drop_client_args(&mut args);
        let mut keys: Vec<_> = args.iter().flat_map(|a| a.keys().cloned()).collect();
        keys.sort();
        assert_eq!(keys, ["colour", "command"]);
    }
}
