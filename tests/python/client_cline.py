"""Cline CLI (`cline` on npm: a Bun-compiled native binary, `@cline/cli-<platform>`, whose agent
is `@cline/core` / `@cline/agents` 0.0.86) against the stand-in model.

`cline PROMPT` runs one task headless in act mode with every tool approved (`--auto-approve`,
default true) and exits when the model answers without a tool call. The model is Cline's
`openai-compatible` provider, configured as `cline auth -p openai -k KEY -m MODEL -b URL` writes
it in `~/.cline/data/settings/providers.json`: the AI SDK's `@ai-sdk/openai-compatible`, so the
wire API is OpenAI Chat Completions, streamed: `POST <baseUrl>/chat/completions` with `stream:
true`, answered with `chat.completion.chunk` events.

Our server comes from `~/.cline/data/settings/cline_mcp_settings.json` (`$CLINE_MCP_SETTINGS_PATH`,
else `$CLINE_DATA_DIR/settings/`, else `$CLINE_DIR/data/settings/`, `$CLINE_DIR` defaulting to
`~/.cline`), key `mcpServers`; an entry may carry `timeout` (seconds per request, default 60).
Over stdio Cline speaks MCP through a JSON-RPC client of its own, not the SDK: `initialize` with
protocol 2024-11-05 and clientInfo `{"name": "@cline/core", "version": "0.0.0"}`, the server run
with Cline's whole environment plus the entry's `env`, and each `tools/call` answer's `result`
taken as it comes (no schema, no output-schema check). Tools are offered as `cuba-exec__<tool>`
with their own descriptions; the server's `instructions` never reach the model.

What Cline hands the model of a tool result (read in its code, measured): the MCP tool's output
is that `result` value, and the message builder makes anything but a string
`JSON.stringify(output)` (`function K7($){if(typeof $==="string")return $;if(Array.isArray($))
return $;return JSON.stringify($)}`; an array result reaches the model as JSON too, measured).
So the model reads the whole CallToolResult as one escaped JSON text, e.g.
`{"content":[{"type":"text","text":"[id:1 exit:0]\\na\\tb …"}],"structuredContent":{…},
"isError":false}`: `structuredContent` holds the output a second time, and `isError` does nothing
else (the result is not marked failed). A text-only result without `isError` is the least of it:
39 characters of wrapper plus one per escaped character (`unwrap` takes our text back out). Only
a bare string `result` (not a CallToolResult) reaches the model as plain text. Then every tool
result is cut to 8000 characters (`CLINE_MESSAGE_BUILDER_MAX_TOOL_RESULT_CHARS` in the client's
environment): `truncateMiddle` keeps the first and last `floor((8000 - len(marker)) / 2)`
characters with the marker `\\n\\n...[truncated N chars]...\\n\\n` between; nothing is saved.

Headless and on loopback only (checked with strace: the stand-in is its only connection):
`telemetryOptOut` in `global-settings.json` stops OpenTelemetry (otel.cline.bot); `E2E_TEST=true`
is the only switch of the PostHog feature-flag fetch (data.cline.bot) and does nothing else;
`CLINE_NO_AUTO_UPDATE=1` and `autoUpdateEnabled: false` stop the update check;
`CLINE_SESSION_BACKEND_MODE=local` runs the session in the process itself, where by default
(`auto`) it spawns a detached hub daemon (`cline --cline-hub-daemon`, in its own session, so
outside the process group the harness kills) that outlives the run. A run takes about 3 s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional, Union

from api_chat import ChatApi
from clients_harness import (
    SERVER,
    Call,
    Pinned,
    Run,
    StandIn,
    cubactl_setup,
    env_flags,
    run_client,
    server_env_of,
    setup_env,
)

NAME = "cline"
VERSION = "3.0.65"
BINARY = "cline"
PROMPT = "Use the cuba-exec tools as needed."
# Cline's provider id for an OpenAI-compatible base URL (`cline auth -p openai` maps to it).
PROVIDER = "openai-compatible"
MODEL = "standin-model"
# Cline's message builder keeps at most this many characters of a tool result (the JSON text),
# cutting the middle out with a marker that starts like CUT_MARKER.
CUT = 8000
CUT_MARKER = "\n\n...[truncated "


def cline_dir(home: Path) -> Path:
    """Cline's folder: `$CLINE_DIR`, by default `~/.cline` (on every platform: HOME, else
    USERPROFILE, else HOMEDRIVE+HOMEPATH, else the OS home)."""
    return home / ".cline"


def settings_dir(home: Path) -> Path:
    """Cline's settings: `$CLINE_DATA_DIR/settings`, by default `~/.cline/data/settings`."""
    return cline_dir(home) / "data" / "settings"


def server_entry(world: Any, server_env: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """Our entry in `mcpServers`, in the shape `cline mcp add NAME --yes -- COMMAND` writes (it
    has no option for the environment, which a user adds inside `transport`). Cline also reads
    the older flat shape `{"command", "args", "env"}` of its VS Code extension."""
    bin_dir = world.shim.parent
    return {
        "transport": {
            "type": "stdio",
            "command": str(bin_dir / "cuba-exec"),
            "args": [],
            "env": server_env_of(world) | (server_env or {}),
        }
    }


def configure_by_hand(world: Any, home: Path, server_env: Optional[dict[str, str]] = None) -> Path:
    """Writes our MCP entry as a user would, in Cline's MCP settings
    `~/.cline/data/settings/cline_mcp_settings.json` (the key `mcpServers`)."""
    path = settings_dir(home) / "cline_mcp_settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    config.setdefault("mcpServers", {})[SERVER] = server_entry(world, server_env)
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def write_provider(home: Path, url: str) -> Path:
    """The stand-in as Cline's provider and model, as `cline auth -p openai -k standin-key -m
    standin-model -b URL/v1` writes them (written here: `cline auth` takes 2.5 s)."""
    path = settings_dir(home) / "providers.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = {"provider": PROVIDER, "apiKey": "standin-key", "model": MODEL, "baseUrl": url + "/v1"}
    providers = {
        "version": 1,
        "lastUsedProvider": PROVIDER,
        "modes": {},
        "providers": {PROVIDER: {"settings": settings, "updatedAt": "2026-01-01T00:00:00.000Z", "tokenSource": "manual"}},
    }
    path.write_text(json.dumps(providers, indent=2) + "\n")
    return path


def write_global_settings(home: Path) -> Path:
    """`~/.cline/data/settings/global-settings.json`: telemetry (OpenTelemetry to
    otel.cline.bot) and the update check off."""
    path = settings_dir(home) / "global-settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    settings.update(telemetryOptOut=True, autoUpdateEnabled=False)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def client_env(world: Any, home: Path) -> dict[str, str]:
    env = setup_env(world, home)
    # Nothing of the developer's Cline setup (CLINE_DIR, CLINE_DATA_DIR, a raised
    # CLINE_MESSAGE_BUILDER_MAX_TOOL_RESULT_CHARS, …) reaches the run.
    for k in [k for k in env if k.startswith("CLINE_") or k in ("IS_TEST", "E2E_TEST")]:
        del env[k]
    env.update(
        CLINE_NO_AUTO_UPDATE="1",
        # The session in this process: by default a detached hub daemon would run it and stay.
        CLINE_SESSION_BACKEND_MODE="local",
        # No PostHog feature-flag fetch from data.cline.bot (its only effect).
        E2E_TEST="true",
    )
    return env


def unwrap(text: str) -> tuple[str, list[str]]:
    """What the model reads of one of our results, out of Cline's `JSON.stringify` of it: the
    text of the result's text blocks (joined with "\\n"), and what else the model was handed
    beside it, in words (other keys such as `structuredContent` or `isError`, more blocks than
    one text, Cline's cut). A text that is not the JSON of a result (cut by Cline, or a result
    that reached the model as plain text) comes back as it is."""
    notes: list[str] = []
    if len(text) >= CUT - 1 and CUT_MARKER in text:
        notes.append(f"Cline cut the result to {CUT} characters ({CUT_MARKER.strip()}…)")
    try:
        value = json.loads(text)
    except ValueError:
        return text, notes
    if not isinstance(value, dict) or not isinstance(value.get("content"), list):
        return text, notes
    blocks = value["content"]
    inner = "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    extra = sorted(k for k in value if k != "content")
    if extra:
        notes.append(f"Cline handed the model the result's JSON with {', '.join(extra)} beside the text")
    if len(blocks) != 1:
        notes.append(f"Cline handed the model {len(blocks)} content blocks as JSON")
    return inner, notes


Configure = Union[str, Callable[[Any, Path], Any], None]


class ClineDriver(Pinned):
    name = NAME
    version = VERSION
    program_name = BINARY
    # Its stdio client's `initialize`: `clientInfo:{name:"@cline/core",version:"0.0.0"}`, fixed
    # (over HTTP the SDK client is named the same by default).
    client_info = "@cline/core"

    def __init__(
        self,
        configure: Configure = None,
        extra_env: Optional[dict[str, str]] = None,
        wrapper: Optional[list[str]] = None,
        extra_args: Optional[list[str]] = None,
        server_env: Optional[dict[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> None:
        # `configure(world, home)` writes our MCP entry: `cubactl setup`, as a user would, or by
        # hand as `cline mcp add` writes it; "by_hand" / "cubactl" name either.
        if configure is None:
            configure = "cubactl"
        if configure in ("by_hand", "hand"):
            configure = lambda world, home: configure_by_hand(world, home, server_env)  # noqa: E731
        elif configure == "cubactl":
            configure = lambda world, home: cubactl_setup(world, home, NAME, *env_flags(server_env))  # noqa: E731
        self.configure: Callable[[Any, Path], Any] = configure  # type: ignore[assignment]
        self.extra_env = extra_env or {}
        # A command the client runs under (e.g. strace), and more arguments of its own, for probes.
        self.wrapper = wrapper or []
        self.extra_args = extra_args or []
        self.timeout = timeout

    # Cline never hands the model a server's `instructions`.
    reads_instructions = False

    @staticmethod
    def unwrap(text: str) -> tuple[str, list[str]]:
        return unwrap(text)

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call]) -> Run:
        exe = self.program()
        home.mkdir(parents=True, exist_ok=True)
        workdir.mkdir(parents=True, exist_ok=True)
        self.configure(world, home)
        write_global_settings(home)
        with StandIn(ChatApi(MODEL), script) as standin:
            write_provider(home, standin.url)
            env = client_env(world, home) | self.extra_env
            cmd = [
                *self.wrapper,
                str(exe),
                "--provider",
                PROVIDER,
                "--model",
                MODEL,
                # The default of a prompt run, said: every tool call, ours included, runs unasked.
                "--auto-approve",
                "true",
                "--cwd",
                str(workdir),
                *self.extra_args,
                PROMPT,
            ]
            kw = {"timeout": self.timeout} if self.timeout else {}
            return run_client(cmd, env, workdir, standin, **kw)


Driver = ClineDriver
