"""Codex CLI as a real client of cuba-exec: the OpenAI Responses API as the stand-in speaks it,
and the driver.

Codex CLI (`@openai/codex`, program `codex`: a Node launcher of a native Rust binary) talks to a
custom model provider (`model_providers.<id>` with `wire_api = "responses"`) by `POST
{base_url}/responses` with `"stream": true` and reads server-sent events: `response.created`,
`response.output_item.added` / `.done` (a `message`, `function_call` or `tool_search_call` item),
`response.output_text.delta`, `response.completed` (its `response.id` is required: a stream
that closes without it is an error). Nothing else is asked for here: no `GET /models` for a
custom provider with an API key, no compressed request body, no websocket.

What Codex CLI 0.169.0 hands the model of an MCP tool result (probe_clients.py shows it):
- a `function_call_output` item `{"call_id", "output"}`; no error flag: `isError` changes
  nothing the model reads.
- a result with a non-null `structuredContent` (with or without an outputSchema): `output` is
  the string `Wall time: <s, 4 decimals> seconds\nOutput:\n` + `serde_json::to_string(
  structuredContent)`; the text blocks are dropped.
- a result without one: `output` is a list of `input_text` items, the first
  `Wall time: <s> seconds\nOutput:`, then one per text block, verbatim. `Seen.text` joins them
  with "\n".
- a long result is cut in the middle, twice: once as the output is built and again as it is
  recorded into the history, each time to 1.2 x the model's truncation limit, the `Wall time`
  item included: bundled models (`gpt-5.5`, ...) `tokens` 10 000 -> 48 000 bytes kept (23 982
  of our text's head, 23 982 of its tail); a model name Codex has no metadata for `bytes`
  10 000 -> 12 000 bytes (5 982 + 5 982). Between head and tail stands `…N tokens truncated…`
  where N (7 or 8) counts only what the second cut removed, not the real cut.
  `tool_output_token_limit = N` (config.toml) sets the limit to N tokens (4 x N bytes);
  `[mcp_servers.<id>.tools.<tool>] output_token_limit = N` one tool's.
- our tools: one Responses `namespace` tool `mcp__cuba_exec` (the server name with `-` made
  `_`) holding functions named as ours (`run`, ...) with our descriptions and schemas (an object
  schema without `properties`, as `env`'s, gets `"properties": {}`), `strict: false`;
  its `description` is our server's `instructions`. For a model whose metadata says
  `supports_search_tool` (every bundled one) the namespace is deferred: the first request
  offers only `tool_search` and a developer message `<tools>\nDeferred tool namespaces:\n-
  mcp__cuba_exec: <the first line of our instructions, cut to 247 chars + "...">`; the model
  calls `tool_search`, Codex answers with a `tool_search_output` holding the namespace (its
  functions marked `defer_loading: true`), and the model then calls `{"type":
  "function_call", "namespace": "mcp__cuba_exec", "name": "run", ...}`. The stand-in does the
  same. A model without metadata gets the namespace in `tools` from the start.
"""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Optional

from clients_harness import (
    server_env_of,
    Call,
    Conversation,
    Run,
    Seen,
    StandIn,
    installed,
    run_client,
    send_json,
    send_sse,
    setup_env,
)

NAME = "codex"
VERSION = "0.169.0"
PROGRAM = "codex"
# The model the provider serves: a bundled one, as a real user of an OpenAI model has. A name
# Codex has no metadata for makes it use fallback metadata (a quarter of the truncation limit,
# MCP tools offered directly instead of behind tool_search).
MODEL = os.environ.get("CUBA_EXEC_CODEX_MODEL", "gpt-5.5")
PROMPT = "Use the cuba-exec tools as instructed."
PROVIDER = "standin"
# What the model asks `tool_search` for when our tools are deferred: every tool of ours has
# the server name in its search text, and the limit is above our tool count.
SEARCH_QUERY = "cuba-exec"
SEARCH_LIMIT = 50
KEY_ENV = "STANDIN_API_KEY"


def _usage() -> dict[str, Any]:
    return {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 110,
    }


def _joined_name(namespace: Optional[str], name: str) -> str:
    """The name Codex itself shows for a namespaced tool (`mcp__cuba_exec__run`): the
    namespace without its trailing `_`, `__`, the name."""
    if not namespace:
        return name
    return f"{namespace.rstrip('_')}__{name.lstrip('_')}"


def _output_text(output: Any) -> str:
    """What the model reads of a `function_call_output`'s `output`: the string, or the text
    items of an item list joined with "\\n" (an image item shows as `[image]`)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        parts = []
        for item in output:
            if not isinstance(item, dict):
                continue
            if item.get("type") in ("input_text", "output_text", "text"):
                parts.append(str(item.get("text", "")))
            elif item.get("type") == "input_image":
                parts.append("[image]")
        return "\n".join(parts)
    return json.dumps(output)


def _message_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(c.get("text", "")) for c in content or [] if isinstance(c, dict) and isinstance(c.get("text"), str))


class ResponsesApi:
    """The OpenAI Responses API (`POST /v1/responses`, streaming), as Codex uses it."""

    def __init__(self) -> None:
        # Client tool name -> (namespace, name) of the function the model calls.
        self.routes: dict[str, tuple[Optional[str], str]] = {}
        self.turn = 0
        self.searches = 0

    def other(self, h: BaseHTTPRequestHandler, method: str, path: str, body: Any) -> bool:
        if method == "GET":
            # A model list, should Codex ask for one (it does not for this provider).
            send_json(h, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "standin"}], "models": []})
            return True
        if not path.rstrip("/").endswith("/responses"):
            send_json(h, {"error": {"message": f"stand-in: no {path}", "type": "invalid_request_error"}}, status=404)
            return True
        if self._needs_search(body):
            # Our tools are deferred behind `tool_search` (a model whose metadata says
            # `supports_search_tool`): the model looks them up first, as a real one must.
            self.searches += 1
            item = {
                "type": "tool_search_call",
                "id": f"ts_{self.searches:02d}",
                "call_id": f"search_{self.searches:02d}",
                "execution": "client",
                "arguments": {"query": SEARCH_QUERY, "limit": SEARCH_LIMIT},
            }
            self._stream(h, item, [])
            return True
        return False

    @staticmethod
    def _declared(body: dict[str, Any]) -> list[dict[str, Any]]:
        """Every tool declaration the model has: the request's `tools`, then the tools that
        earlier `tool_search_output` items loaded."""
        out = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "tool_search_output":
                out += [t for t in item.get("tools") or [] if isinstance(t, dict)]
        return out

    def _needs_search(self, body: Any) -> bool:
        if not isinstance(body, dict) or not isinstance(body.get("input"), list):
            return False
        declared = self._declared(body)
        if not any(t.get("type") == "tool_search" for t in declared):
            return False
        if any("cuba" in str(t.get("name")) for t in declared):
            return False
        # One search only: if it found nothing of ours, the conversation goes on without.
        return not any(isinstance(i, dict) and i.get("type") == "tool_search_call" for i in body["input"])

    def conversation(self, path: str, body: Any) -> Optional[Conversation]:
        if not isinstance(body, dict):
            return None
        tools: dict[str, Any] = {}
        for tool in self._declared(body):
            if tool.get("type") == "namespace":
                for inner in tool.get("tools") or []:
                    if isinstance(inner, dict) and inner.get("name"):
                        full = _joined_name(tool.get("name"), inner["name"])
                        tools[full] = {**inner, "namespace": tool.get("name"), "namespace_description": tool.get("description")}
                        self.routes[full] = (tool.get("name"), inner["name"])
            elif tool.get("name"):
                tools[tool["name"]] = tool
                self.routes[tool["name"]] = (None, tool["name"])
        if not any("cuba" in n for n in tools):
            return None
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        calls = {i.get("call_id"): i for i in items if i.get("type") == "function_call"}
        results: list[Seen] = []
        for item in items:
            if item.get("type") != "function_call_output":
                continue
            call = calls.get(item.get("call_id")) or {}
            results.append(
                Seen(
                    call_id=str(item.get("call_id") or ""),
                    name=_joined_name(call.get("namespace"), str(call.get("name") or "")),
                    text=_output_text(item.get("output")),
                    raw=item,
                    # Codex sends no error flag with an output.
                    is_error=None,
                )
            )
        # What the model reads before the conversation: the instructions field, then the
        # developer and user messages up to the first user message that is not context.
        preamble = [body["instructions"]] if isinstance(body.get("instructions"), str) and body["instructions"] else []
        for item in items:
            if item.get("type") != "message" or item.get("role") not in ("developer", "system", "user"):
                break
            text = _message_text(item)
            preamble.append(text)
            if item.get("role") == "user" and not text.lstrip().startswith("<environment_context>"):
                break
        return Conversation(results=results, tools=tools, preamble="\n".join(preamble))

    def _stream(self, h: BaseHTTPRequestHandler, item: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> None:
        self.turn += 1
        rid = f"resp_{self.turn:03d}"
        added = {**item, "status": "in_progress"}
        if item["type"] == "function_call":
            added["arguments"] = ""
        elif item["type"] == "message":
            added["content"] = []
        out: list[tuple[Optional[str], Any]] = [
            ("response.created", {"type": "response.created", "response": {"id": rid, "object": "response", "status": "in_progress", "model": MODEL, "output": []}}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": added}),
        ]
        out += [(name, {"type": name, **data}) for name, data in events]
        done = {**item, "status": "completed"}
        out += [
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": done}),
            ("response.completed", {"type": "response.completed", "response": {"id": rid, "object": "response", "status": "completed", "model": MODEL, "output": [done], "usage": _usage()}}),
        ]
        send_sse(h, out)

    def tool_call(self, h: BaseHTTPRequestHandler, path: str, body: Any, name: str, args: dict[str, Any], call_id: str) -> None:
        namespace, fn = self.routes.get(name, (None, name))
        arguments = json.dumps(args)
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": fn, "arguments": arguments}
        if namespace:
            item["namespace"] = namespace
        self._stream(
            h,
            item,
            [("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": 0, "delta": arguments}),
             ("response.function_call_arguments.done", {"item_id": item["id"], "output_index": 0, "arguments": arguments})],
        )

    def text(self, h: BaseHTTPRequestHandler, path: str, body: Any, text: str) -> None:
        mid = f"msg_{self.turn + 1:03d}"
        item = {"type": "message", "id": mid, "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}
        self._stream(
            h,
            item,
            [("response.output_text.delta", {"item_id": mid, "output_index": 0, "content_index": 0, "delta": text}),
             ("response.output_text.done", {"item_id": mid, "output_index": 0, "content_index": 0, "text": text})],
        )


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a TOML basic string is a JSON string for what we write


def server_entry(world: Any, approval: Optional[str] = "approve", extra_env: Optional[dict[str, str]] = None) -> str:
    """Our server's table in ~/.codex/config.toml (`approval`: its `default_tools_approval_mode`,
    None for none; `extra_env`: more variables for the server)."""
    bin_dir = world.shim.parent
    env = server_env_of(world) | (extra_env or {})
    lines = [
        "[mcp_servers.cuba-exec]",
        f"command = {_toml_str(str(bin_dir / 'cuba-exec'))}",
        "args = []",
        # Runs every tool of ours without asking. Without it Codex wants an approval for each
        # call of a tool not annotated read-only (ours say destructiveHint), and `codex exec`
        # refuses the call: "MCP tool call requires approval, but approval policy is never"
        # (its default policy; with on-request it reads "user cancelled MCP tool call").
        *([f"default_tools_approval_mode = {_toml_str(approval)}"] if approval else []),
        "",
        # Codex starts an MCP server with a minimal environment (HOME, LANG, PATH, SHELL, TERM,
        # USER, LOGNAME, TMPDIR, TZ and the CA-bundle variables, where set); what our server
        # needs beyond it comes from this table.
        "[mcp_servers.cuba-exec.env]",
    ]
    lines += [f"{k} = {_toml_str(v)}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def configure_by_hand(world: Any, home: Path, approval: Optional[str] = "approve", extra_env: Optional[dict[str, str]] = None) -> Path:
    """Writes our server's entry into ~/.codex/config.toml as a user would (what `cubactl setup
    --client codex` will write)."""
    path = home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    if "[mcp_servers.cuba-exec]" in old:
        raise ValueError(f"{path} has a cuba-exec entry already")
    path.write_text(old + ("\n" if old and not old.endswith("\n") else "") + server_entry(world, approval, extra_env))
    return path


def quiet_overrides(url: str, model: str, full_access: bool = False) -> list[str]:
    """`-c key=value` overrides of ours (not of the MCP entry): the stand-in as the model
    provider, nothing that leaves loopback (checked with strace: with these, Codex connects to
    the stand-in and our daemon's socket only)."""
    provider = (
        f'{{ name = "stand-in", base_url = {_toml_str(url + "/v1")}, wire_api = "responses", '
        f'env_key = "{KEY_ENV}", request_max_retries = 0, stream_max_retries = 0, '
        f"stream_idle_timeout_ms = 120000 }}"
    )
    settings = {
        f"model_providers.{PROVIDER}": provider,
        "model_provider": f'"{PROVIDER}"',
        "model": _toml_str(model),
        # No update check (interactive only anyway), no analytics, no OpenTelemetry export,
        # no hosted web search offered to the model.
        "check_for_update_on_startup": "false",
        "analytics.enabled": "false",
        "feedback.enabled": "false",
        "otel.exporter": '"none"',
        "otel.metrics_exporter": '"none"',
        "otel.trace_exporter": '"none"',
        "web_search": '"disabled"',
        # The plugin marketplace: at start Codex runs `git ls-remote
        # https://github.com/openai/plugins HEAD` to sync its curated plugins.
        "features.plugins": "false",
    }
    if full_access:
        settings["approval_policy"] = '"never"'
        settings["sandbox_mode"] = '"danger-full-access"'
    out: list[str] = []
    for k, v in settings.items():
        out += ["-c", f"{k}={v}"]
    return out


class Driver:
    name = NAME
    version = VERSION
    client_info = "codex-mcp-client"

    def __init__(
        self,
        model: str = MODEL,
        configure: str = "cubactl",
        approval: Optional[str] = "approve",
        extra_config: Optional[list[str]] = None,
        server_env: Optional[dict[str, str]] = None,
        full_access: bool = False,
    ) -> None:
        self.model = model
        self.configure = configure
        self.approval = approval
        # More variables in our MCP entry's env table (e.g. CUBA_EXEC_STRUCTURED=always).
        self.server_env = server_env or {}
        # True: `approval_policy = "never"` and `sandbox_mode = "danger-full-access"`, under
        # which Codex asks for no MCP approval at all. False (the default): codex exec's own
        # (never, read-only), where the MCP entry's approval mode is what lets our tools run.
        self.full_access = full_access
        # More `-c key=value` overrides (e.g. `tool_output_token_limit=2500`).
        self.extra_config = extra_config or []

    @staticmethod
    def installed() -> bool:
        return installed(NAME, VERSION, PROGRAM) is not None

    def command(self, url: str) -> list[str]:
        exe = installed(NAME, VERSION, PROGRAM)
        if exe is None:
            raise FileNotFoundError(f"{NAME}@{VERSION} not installed: run scripts/clients install")
        return [str(exe), "exec", "--skip-git-repo-check", "--ephemeral", "--color", "never", *quiet_overrides(url, self.model, self.full_access), *(a for kv in self.extra_config for a in ("-c", kv)), PROMPT]

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call], extra_env: Optional[dict[str, str]] = None) -> Run:
        if self.configure == "cubactl":
            from clients_harness import cubactl_setup, env_flags

            # The approval setting setup writes only when asked: without it `codex exec`
            # refuses our tools marked destructive.
            approve = ["--codex-approve"] if self.approval == "approve" else []
            cubactl_setup(world, home, NAME, *approve, *env_flags(self.server_env))
        else:
            configure_by_hand(world, home, self.approval, self.server_env)
        with StandIn(ResponsesApi(), script) as standin:
            env = setup_env(world, home)
            env.update({"CODEX_HOME": str(home / ".codex"), KEY_ENV: "test"})
            env.update(extra_env or {})
            return run_client(self.command(standin.url), env, workdir, standin)
