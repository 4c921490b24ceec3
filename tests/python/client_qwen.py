"""Qwen Code (`@qwen-code/qwen-code` on npm, program `qwen`, a fork of Gemini CLI) against the
stand-in model.

Qwen Code talks to an OpenAI-compatible provider with the OpenAI JS SDK: the auth type `openai`
with `OPENAI_API_KEY`, `OPENAI_BASE_URL` and `OPENAI_MODEL` (all three set select it in a
headless run), so the wire API is OpenAI Chat Completions, streamed: `POST <base>/chat/completions`
with `stream: true`, answered with `chat.completion.chunk` server-sent events and `data: [DONE]`.
`qwen PROMPT` (a positional prompt) runs it once, non-interactively, and exits.

Our tools are deferred: every MCP tool is `shouldDefer` (mcp-tool.ts), so the model is offered
Qwen Code's bridge instead, `tool_search` (`{"query": "select:<name>" | keywords}`: the tool's
declaration, as text) and `tool_call` (`{"name": <tool>, "arguments": {...}}`: runs it), plus a
startup reminder that names each deferred tool (`mcp__cuba-exec__<tool>`). That is what a user
gets from `qwen mcp add` (it has no option to change it), so the stand-in model does what the
reminder tells a model: it reviews a tool with `tool_search` the first time it uses it and calls
it through `tool_call`. The scheduler rewrites a `tool_call` into the call of the tool itself
(permissions, truncation and the result are the tool's own; only the function response is named
`tool_call`). Settings that offer our tools directly instead: the server entry's
`alwaysLoadTools: true`, `tools.visible`, `tools.toolSearch.enabled: false`, or
`tools.toolSearch.threshold` (a share of the context window the deferred schemas must fit in).

What Qwen Code 0.24.4 does with an MCP tool result before the model sees it (read in its
bundle: chunks/chunk-2VS5EEXU.js `transformMcpContentToParts`, `buildMcpToolError`,
`truncateTextParts`, chunks/chunk-DPEB6S2R.js the scheduler's `maybePersistLargeToolResult`;
checked by running it against our server and a fake one):
- success: each text block becomes a text part; the parts, joined with "\n", are the function
  response's `output`, which is the `role: "tool"` message's content (one text part), with no
  wrapper. A result with `structuredContent` gets `JSON.stringify(structuredContent)` as a text
  part BEFORE the text blocks (left out only when a text block equals it exactly): the model
  reads the JSON, "\n", then our text (short run: 157 characters instead of 28).
- `isError: true`: the model reads `MCP tool '<tool>' reported tool error for function call:
  {"name":"<tool>","args":{...}} with response: [{"functionResponse":{"name":"<tool>",
  "response":{"error":<the whole result: content, structuredContent, isError>,"content":[...]}}}]`,
  as Gemini CLI does; without the flag a failure is handled as a success (our text alone).
- size: a result whose text (the structured JSON included) is longer than
  `tools.truncateToolOutputThreshold` (default 25 000) + 3 000 = 28 000 characters (JS string
  length) is saved whole to `~/.qwen/tmp/<project hash>/tool-results/<call id>.txt` and the
  model gets a `<persisted-output>` note naming the file with only the first 2 000 characters
  (cut at a line end, no tail); a threshold of 0 or less turns that off (measured: 28 000
  characters arrive whole, 28 001 become a 2 456-character note). Before that gate, each text
  part over 500 000 characters is cut to a 2 000-character head fifth and tail four fifths
  with `... [CONTENT TRUNCATED] ...` and saved to a file (fixed, no setting); the results of
  one batch of calls share 200 000 characters (`tools.toolOutputBatchBudget`).
  `_meta["anthropic/maxResultSizeChars"]` is not read.
- tool names `mcp__cuba-exec__<tool>`, our input schemas unchanged, no argument added; the
  search matches names and descriptions (its hint for an MCP tool is `mcp <server>`; our
  `_meta["anthropic/searchHint"]` is not read).
- our server's `instructions` reach the model in the first user turn, as a `<system-reminder>`
  "The text below was supplied by the MCP server. …\n\n### cuba-exec\n<instructions>".
- `initialize`: protocolVersion `2025-11-25`, clientInfo `{"name": "qwen-cli-mcp-client-<entry
  name>", "version": "0.0.1"}`: the user's key in `mcpServers` is part of the name
  (`qwen-cli-mcp-client-cuba-exec` for ours).
- a call of ours runs without a prompt only with `trust: true` in the entry; without it a
  headless run answers "Qwen Code requires permission to use "mcp__cuba-exec__run", but that
  permission was declined (non-interactive mode cannot prompt for confirmation)."
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Callable, Optional

from api_chat import ChatApi, _text_of
from clients_harness import (
    SERVER,
    Call,
    Conversation,
    Pinned,
    Run,
    Seen,
    StandIn,
    cubactl_setup,
    merge_settings,
    env_flags,
    run_client,
    server_env_of,
    setup_env,
)

NAME = "qwen"
VERSION = "0.24.4"
PROGRAM = "qwen"
PROMPT = "Use the cuba-exec tools as needed."
MODEL = "standin-model"
# Qwen Code's bridge to deferred tools.
SEARCH = "tool_search"
BRIDGE = "tool_call"
# The names our tools have in Qwen Code (`mcp__<server>__<tool>`), as the deferred-tools
# reminder and a `tool_call` name them.
OURS = re.compile(r"mcp__" + re.escape(SERVER) + r"__[A-Za-z0-9_]+")


class QwenApi(ChatApi):
    """Chat Completions, as a model that reaches deferred tools through `tool_search` and
    `tool_call` speaks it: results of our tools (direct or through the bridge) are the
    conversation's results, the searches are not."""

    @staticmethod
    def _calls(body: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
        """Every tool call the model made: call id -> (name, arguments)."""
        calls = {}
        for m in body.get("messages") or []:
            if m.get("role") != "assistant":
                continue
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                calls[tc.get("id", "")] = (fn.get("name", ""), args if isinstance(args, dict) else {})
        return calls

    def conversation(self, path: str, body: Any) -> Optional[Conversation]:
        conv = super().conversation(path, body)
        if conv is None:
            return None
        calls = self._calls(body)
        results: list[Seen] = []
        for seen in conv.results:
            name, args = calls.get(seen.call_id, (seen.name, {}))
            if name == BRIDGE:
                name = str(args.get("name") or "")
            if OURS.fullmatch(name):
                seen.name = name
                results.append(seen)
        tools = dict(conv.tools)
        if not any(OURS.fullmatch(n) for n in tools):
            if BRIDGE not in tools:
                return None
            # Deferred: the model knows our tools by the names the startup reminder lists.
            text = "\n".join(_text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") in ("system", "user"))
            tools.update({n: {"deferred": True} for n in OURS.findall(text)})
            if not any(OURS.fullmatch(n) for n in tools):
                return None
        return Conversation(results=results, tools=tools, preamble=conv.preamble)

    def tool_call(self, h: BaseHTTPRequestHandler, path: str, body: Any, name: str, args: dict[str, Any], call_id: str) -> None:
        offered = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        if name in offered:
            return super().tool_call(h, path, body, name, args, call_id)
        reviewed = any(n == SEARCH and name in str(a.get("query", "")) for n, a in self._calls(body).values())
        if not reviewed:
            # First use: review its declaration, as the bridge requires.
            return super().tool_call(h, path, body, SEARCH, {"query": f"select:{name}"}, call_id + "_search")
        super().tool_call(h, path, body, BRIDGE, {"name": name, "arguments": args}, call_id)


def config_dir(home: Path) -> Path:
    """Qwen Code's user folder: `~/.qwen` (`$QWEN_HOME` if set), on every OS."""
    return home / ".qwen"


def server_entry(world: Any, server_env: Optional[dict[str, str]] = None, always_load: bool = False) -> dict[str, Any]:
    """Our entry in `mcpServers`, as `qwen mcp add --trust -e K=V cuba-exec <cuba-exec>` writes it."""
    bin_dir = world.shim.parent
    entry: dict[str, Any] = {
        "command": str(bin_dir / "cuba-exec"),
        "args": [],
        "env": server_env_of(world) | (server_env or {}),
        # Our tools run without a confirmation (default permission `allow` in a trusted folder;
        # folder trust is off by default, which counts as trusted). Without it a headless run
        # denies every call of ours.
        "trust": True,
    }
    if always_load:
        # Our tools declared up front, not behind tool_search + tool_call.
        entry["alwaysLoadTools"] = True
    return entry


def write_settings(home: Path, patch: dict[str, Any]) -> Path:
    return merge_settings(config_dir(home) / "settings.json", patch)


def configure_by_hand(world: Any, home: Path, server_env: Optional[dict[str, str]] = None, always_load: bool = False) -> Path:
    """Writes our MCP entry into ~/.qwen/settings.json (key `mcpServers`) as a user would: what
    `cubactl setup --client qwen --qwen-trust` writes."""
    return write_settings(home, {"mcpServers": {SERVER: server_entry(world, server_env, always_load)}})


# Settings of ours, not of the MCP entry: they keep the client on loopback and quiet.
QUIET_SETTINGS: dict[str, Any] = {
    # The OpenAI-compatible provider of OPENAI_API_KEY / OPENAI_BASE_URL / OPENAI_MODEL.
    "security": {"auth": {"selectedType": "openai"}},
    # Usage statistics (Qwen's RUM logger) and OpenTelemetry off.
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    # npm update check and auto-update off.
    "general": {"enableAutoUpdate": False},
    "ide": {"enabled": False},
}


class QwenDriver(Pinned):
    name = NAME
    version = VERSION
    program_name = PROGRAM
    # `new Client({name: `qwen-cli-mcp-client-${serverName}`, version: "0.0.1"})`.
    client_info = f"qwen-cli-mcp-client-{SERVER}"

    def __init__(
        self,
        model: str = MODEL,
        configure: Optional[Callable[[Any, Path], Any]] = None,
        server_env: Optional[dict[str, str]] = None,
        always_load: bool = False,
        settings: Optional[dict[str, Any]] = None,
        extra_args: Optional[list[str]] = None,
        extra_env: Optional[dict[str, str]] = None,
        wrapper: Optional[list[str]] = None,
        timeout: Optional[float] = None,
    ) -> None:
        self.model = model
        # `configure(world, home)` writes our MCP entry: `cubactl setup` as a user would, with
        # `trust` (a headless run refuses every call of a server without it); by hand (what a
        # user writes into ~/.qwen/settings.json) where a probe wants `alwaysLoadTools`.
        if configure is None:
            if always_load:
                configure = lambda world, home: configure_by_hand(world, home, server_env, always_load)  # noqa: E731
            else:
                configure = lambda world, home: cubactl_setup(world, home, NAME, "--qwen-trust", *env_flags(server_env))  # noqa: E731
        self.configure = configure
        # More settings (e.g. {"tools": {"truncateToolOutputThreshold": 0}}), for probes.
        self.settings = settings or {}
        self.extra_args = extra_args or []
        self.extra_env = extra_env or {}
        # A command the client runs under (e.g. strace), for probes.
        self.wrapper = wrapper or []
        self.timeout = timeout

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call]) -> Run:
        exe = self.program()
        home.mkdir(parents=True, exist_ok=True)
        workdir.mkdir(parents=True, exist_ok=True)
        self.configure(world, home)
        write_settings(home, QUIET_SETTINGS)
        if self.settings:
            write_settings(home, self.settings)
        with StandIn(QwenApi(self.model), script) as standin:
            env = setup_env(world, home)
            # Nothing of the developer's own Qwen Code or DashScope setup.
            for k in [k for k in env if k.startswith(("QWEN_", "DASHSCOPE_", "OPENROUTER_"))]:
                del env[k]
            env.update(OPENAI_API_KEY="standin-key", OPENAI_BASE_URL=standin.url + "/v1", OPENAI_MODEL=self.model)
            env.update(self.extra_env)
            cmd = [*self.wrapper, str(exe), "--output-format", "text", *self.extra_args, PROMPT]
            kw = {"timeout": self.timeout} if self.timeout else {}
            return run_client(cmd, env, workdir, standin, **kw)


Driver = QwenDriver
