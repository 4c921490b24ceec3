"""Claude Code (the `claude` CLI) as a real client of cuba-exec: its driver and its wire API.

Claude Code 2.1.328 talks Anthropic Messages to `ANTHROPIC_BASE_URL`: `POST /v1/messages?beta=true`
with `"stream": true` (SSE: message_start, content_block_start/delta/stop, message_delta with
the stop_reason, message_stop), and `POST /v1/messages/count_tokens?beta=true` to measure an MCP
result it estimates at over 12,500 tokens (answered here at 4 characters a token, the client's
own estimate). With CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 it sends nothing else anywhere.

It names MCP tools `mcp__<server>__<tool>` and defers them (tool search is on by default): the
first request's `tools` hold none of ours, only a `DeferredToolPlaceholder` with
`"defer_loading": true`, and a `role: "system"` message after the first user turn lists their
names ("The following deferred tools are now available via ToolSearch. ..."), followed by the
MCP servers' instructions. The model must call `ToolSearch` ({"query": ...}); its result is a
list of `tool_reference` blocks, and from then on the tools found are in `tools`, declared in
full with `"defer_loading": true`. The stand-in does that like a model: `Driver.run(...,
search=[queries])` calls `ToolSearch` once per query before the script (default: one
`select:` query of the script's tools) and `ClaudeRun.searches` holds what each query found.

`claude -p` asks no one, so our tools must be allowed in advance: `permissions.allow:
["mcp__cuba-exec"]` in `~/.claude/settings.json` (or `--allowedTools mcp__cuba-exec`); as root
`--dangerously-skip-permissions` is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Optional

from clients_harness import (
    server_env_of,
    cubactl_setup,
    env_flags,
    SERVER,
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

# As `cubactl setup --client` and scripts/clients name it.
NAME = "claude-code"
VERSION = "2.1.328"
BINARY = "claude"
# The clientInfo.name Claude Code sends (in `_meta` of every request on 2026-07-28).
CLIENT_INFO = "claude-code"
# The first user turn of every run; it marks the main conversation.
PROMPT = "Use the cuba-exec tools as scripted. (cuba-exec client test)"
MARKER = "(cuba-exec client test)"
# Claude Code's tool that loads deferred tools.
TOOL_SEARCH = "ToolSearch"
# Ids of the stand-in's ToolSearch calls.
SEARCH_ID = "toolu_search_{:02d}"


def _text_of(content: Any) -> str:
    """The text a model reads of a message or tool_result content (a string or blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(block.get("text", ""))
    return "\n".join(parts)


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return ""


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    for m in messages:
        if m.get("role") == "user":
            return _text_of(m.get("content"))
    return ""


def _preamble(body: dict[str, Any]) -> str:
    """The `system` prompt, then every message before the first assistant turn: the first user
    turn and the `role: "system"` message Claude Code puts after it (the deferred tools' names,
    the MCP servers' instructions, the skills)."""
    parts = [_system_text(body.get("system"))]
    for m in body.get("messages") or []:
        if m.get("role") == "assistant":
            break
        parts.append(_text_of(m.get("content")))
    return "\n".join(parts)


def _count_tokens(body: Any) -> int:
    """A token count for `body` (a count_tokens request): its text, 4 characters a token."""
    if not isinstance(body, dict):
        return 1
    chars = len(_system_text(body.get("system")))
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    chars += len(_text_of(b.get("content")))
                elif isinstance(b, dict):
                    chars += len(b.get("text", "")) if b.get("type") == "text" else len(json.dumps(b))
        else:
            chars += len(_text_of(content))
    chars += sum(len(json.dumps(t)) for t in body.get("tools") or [])
    return max(1, (chars + 3) // 4)


DEFERRED_INTRO = "The following deferred tools are now available via ToolSearch."


def _deferred_names(body: dict[str, Any]) -> list[str]:
    """The names in Claude Code's list of deferred tools (one a line after its intro line)."""
    text = _preamble(body)
    at = text.find(DEFERRED_INTRO)
    if at < 0:
        return []
    lines = text[at:].split("\n")[1:]
    names = []
    for line in lines:
        if not line.strip():
            break
        names.append(line.strip())
    return names


def _blocks(messages: list[dict[str, Any]], role: str, kind: str) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        if m.get("role") != role or not isinstance(m.get("content"), list):
            continue
        out.extend(b for b in m["content"] if isinstance(b, dict) and b.get("type") == kind)
    return out


class AnthropicApi:
    """Anthropic Messages as Claude Code uses it: `POST /v1/messages` (SSE when `stream`),
    `POST /v1/messages/count_tokens`; a `ToolSearch` phase before the script when `search`."""

    def __init__(self, search: Optional[list[str]] = None, script: Optional[list[Call]] = None) -> None:
        if search is None:
            # As a model does that knows the names (the system message lists them): one
            # `select:` query loading every tool of the script.
            names = sorted({f"mcp__{SERVER}__{c.tool}" for c in script or []})
            search = [f"select:{','.join(names)}"] if names else []
        self.search = list(search)
        # The tools Claude Code announced by name only (deferred), from its system message.
        self.deferred: list[str] = []
        # (query, our tools found) per ToolSearch call, in order.
        self.searches: list[tuple[str, list[str]]] = []
        self.other_paths: list[str] = []
        # The answers to count_tokens requests.
        self.counted: list[int] = []

    # --- what is the main conversation ---------------------------------------------------

    @staticmethod
    def _is_main(path: str, body: Any) -> bool:
        if not path.startswith("/v1/messages") or "count_tokens" in path or not isinstance(body, dict):
            return False
        return MARKER in _first_user_text(body.get("messages") or [])

    def conversation(self, path: str, body: Any) -> Optional[Conversation]:
        if not self._is_main(path, body):
            return None
        messages = body.get("messages") or []
        names = {b["id"]: b["name"] for b in _blocks(messages, "assistant", "tool_use")}
        results = []
        for b in _blocks(messages, "user", "tool_result"):
            name = names.get(b.get("tool_use_id"), "")
            if name == TOOL_SEARCH:
                continue
            results.append(Seen(b.get("tool_use_id", ""), name, _text_of(b.get("content")), b, b.get("is_error")))
        tools = {t["name"]: t for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t}
        return Conversation(results, tools, _preamble(body))

    # --- answers -------------------------------------------------------------------------

    def _answer(self, h: BaseHTTPRequestHandler, body: Any, blocks: list[dict[str, Any]], stop: str) -> None:
        model = body.get("model", "claude-sonnet-4-5") if isinstance(body, dict) else "claude-sonnet-4-5"
        msg_id = f"msg_standin_{len(body.get('messages') or []):03d}" if isinstance(body, dict) else "msg_standin"
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not (isinstance(body, dict) and body.get("stream")):
            send_json(
                h,
                {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage},
            )
            return
        events: list[tuple[Optional[str], Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage | {"output_tokens": 1}},
                },
            )
        ]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}))
            else:
                start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}))
        events.append(("message_stop", {"type": "message_stop"}))
        send_sse(h, events)

    def tool_call(self, h: BaseHTTPRequestHandler, path: str, body: Any, name: str, args: dict[str, Any], call_id: str) -> None:
        self._answer(h, body, [{"type": "tool_use", "id": f"toolu_{call_id}", "name": name, "input": args}], "tool_use")

    def text(self, h: BaseHTTPRequestHandler, path: str, body: Any, text: str) -> None:
        self._answer(h, body, [{"type": "text", "text": text}], "end_turn")

    def other(self, h: BaseHTTPRequestHandler, method: str, path: str, body: Any) -> bool:
        if path.startswith("/v1/messages/count_tokens"):
            # Claude Code counts a large MCP result this way (MAX_MCP_OUTPUT_TOKENS); the
            # estimate is the client's own: 4 characters a token.
            send_json(h, {"input_tokens": _count_tokens(body)})
            self.counted.append(_count_tokens(body))
            return True
        if not path.startswith("/v1/messages"):
            self.other_paths.append(f"{method} {path}")
            if path.startswith("/v1/models"):
                send_json(h, {"data": [], "has_more": False, "first_id": None, "last_id": None})
            else:
                send_json(h, {"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}}, 404)
            return True
        if not self._is_main(path, body):
            return False
        if not self.deferred:
            self.deferred = _deferred_names(body)
        if not self.search:
            return False
        # The ToolSearch phase: one call per query, before the script.
        messages = body.get("messages") or []
        done = [b for b in _blocks(messages, "user", "tool_result") if str(b.get("tool_use_id", "")).startswith("toolu_search_")]
        self.searches = [(q, self._found(b)) for q, b in zip(self.search, done)]
        if len(done) >= len(self.search):
            return False
        n = len(done)
        self._answer(h, body, [{"type": "tool_use", "id": SEARCH_ID.format(n + 1), "name": TOOL_SEARCH, "input": {"query": self.search[n]}}], "tool_use")
        return True

    @staticmethod
    def _found(result: dict[str, Any]) -> list[str]:
        """The tools a ToolSearch result names (its `tool_reference` blocks)."""
        content = result.get("content")
        if not isinstance(content, list):
            return []
        return [b.get("tool_name", "") for b in content if isinstance(b, dict) and b.get("type") == "tool_reference"]


@dataclass
class ClaudeRun(Run):
    # (query, tools found) for each ToolSearch call the stand-in made.
    searches: Optional[list[tuple[str, list[str]]]] = None
    # The tools Claude Code offered by name only (deferred until a ToolSearch loads them).
    deferred: Optional[list[str]] = None
    # The stand-in's answers to count_tokens requests; requests to other paths than the API's.
    counted: Optional[list[int]] = None
    other_paths: Optional[list[str]] = None


def configure_by_hand(world: Any, home: Path, server_env: Optional[dict[str, str]] = None) -> None:
    """Our MCP entry as `claude mcp add --scope user cuba-exec -e K=V ... -- <bin>/cuba-exec`
    writes it: `mcpServers` of `~/.claude.json`."""
    bin_dir = world.shim.parent
    entry = {
        "type": "stdio",
        "command": str(bin_dir / "cuba-exec"),
        "args": [],
        "env": server_env_of(world),
    }
    # More of the server's environment, for probes (e.g. CUBA_EXEC_LOG, CUBA_EXEC_STRUCTURED).
    entry["env"].update(server_env or {})
    config_path = home / ".claude.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    config.setdefault("mcpServers", {})[SERVER] = entry
    config_path.write_text(json.dumps(config, indent=2) + "\n")


def allow_our_tools(home: Path) -> None:
    """The permission a user gives our tools for `-p` mode, which has no one to ask (without
    it every call is refused): `permissions.allow: ["mcp__cuba-exec"]` (all the server's tools)
    in the user settings, `~/.claude/settings.json`."""
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text()) if path.exists() else {}
    allow = settings.setdefault("permissions", {}).setdefault("allow", [])
    if f"mcp__{SERVER}" not in allow:
        allow.append(f"mcp__{SERVER}")
    path.write_text(json.dumps(settings, indent=2) + "\n")


def client_env(world: Any, home: Path, url: str) -> dict[str, str]:
    env = setup_env(world, home)
    env.update(
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY="sk-ant-test",
        # No telemetry, error reports, feature flags (GrowthBook), update checks: without it the
        # client looks up api.anthropic.com and sends `HEAD /api/hello` to the base URL. The
        # next three are covered by it; set too, as a user who wants no traffic would.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        # Tool calls are slow on a busy machine; nothing here is timed.
        MCP_TIMEOUT="60000",
        MCP_TOOL_TIMEOUT="120000",
    )
    return env


class Driver:
    name = NAME
    version = VERSION
    client_info = CLIENT_INFO

    def __init__(
        self,
        configure: Optional[Any] = None,
        extra_env: Optional[dict[str, str]] = None,
        wrapper: Optional[list[str]] = None,
        extra_args: Optional[list[str]] = None,
        server_env: Optional[dict[str, str]] = None,
    ) -> None:
        # `configure(world, home)` writes our MCP entry (default: `cubactl setup`, as a user
        # would); `run` adds the permission that setup's note names.
        self.configure = configure or (lambda world, home: cubactl_setup(world, home, NAME, *env_flags(server_env)))
        self.extra_env = extra_env or {}
        # A command the client runs under (e.g. strace), and more arguments of its own (e.g.
        # `--debug-file PATH`), for probes.
        self.wrapper = wrapper or []
        self.extra_args = extra_args or []

    def installed(self) -> bool:
        return installed(NAME, VERSION, BINARY) is not None

    def program(self) -> Path:
        exe = installed(NAME, VERSION, BINARY)
        if exe is None:
            raise FileNotFoundError(f"{NAME}@{VERSION} is not installed (scripts/clients install)")
        return exe

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call], search: Optional[list[str]] = None) -> ClaudeRun:
        exe = self.program()
        self.configure(world, home)
        allow_our_tools(home)
        api = AnthropicApi(search, script)
        with StandIn(api, script) as standin:
            env = client_env(world, home, standin.url) | self.extra_env
            turns = len(script) + len(api.search) + 2
            cmd = [*self.wrapper, str(exe), "-p", PROMPT, "--output-format", "json", "--max-turns", str(turns), *self.extra_args]
            run = run_client(cmd, env, workdir, standin)
        return ClaudeRun(
            run.returncode,
            run.stdout,
            run.stderr,
            run.seen,
            run.record,
            searches=api.searches,
            deferred=api.deferred,
            counted=api.counted,
            other_paths=api.other_paths,
        )
