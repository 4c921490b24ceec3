"""Kilo CLI (`@kilocode/cli` on npm, program `kilo`: a fork of opencode, a Bun-compiled native
binary `bin/.kilo` started by the Node script `bin/kilo`) against the stand-in model.

As for opencode, the model is a provider of our own in Kilo's config, served by the AI SDK's
`@ai-sdk/openai-compatible` package (bundled in the binary), so the wire API is OpenAI Chat
Completions, streamed: `POST <baseURL>/chat/completions` with `stream: true`, answered with
`chat.completion.chunk` server-sent events and `data: [DONE]`. Kilo renamed opencode's settings:
the user config is `$XDG_CONFIG_HOME/kilo/kilo.json` (also `kilo.jsonc`, and the legacy
`opencode.json`, `opencode.jsonc`, `config.json` there), the variables are `KILO_*`
(`KILO_CONFIG_CONTENT` is inline JSON merged over the files), the data under
`$XDG_DATA_HOME/kilo`.

What Kilo 7.7.7 does with an MCP tool result before the model sees it (read in its bundle,
checked by runs): opencode's code, unchanged. The result's text blocks (and embedded text
resources) are joined with "\\n"; an empty `content` with `structuredContent` becomes that JSON,
otherwise `structuredContent` is not shown; `isError: true` makes its execute throw
`Error(<the non-blank text blocks joined with "\\n">)`: the model reads exactly that text (no
prefix, no flag in Chat Completions) and it is never cut. A successful result's text goes
through `Truncate.output`: above 2000 lines or 51200 bytes (config `tool_output.max_lines` /
`max_bytes`) it keeps the head (whole lines), appends `\\n...N lines truncated...\\n` (or
`bytes`) and a note naming the file under `$XDG_DATA_HOME/kilo/tool-output/` where it saved the
whole text. Our tools are offered as `cuba-exec_<tool>` and run without a question (the default
`code` agent allows `*`); the server's `instructions` are in the system prompt, in
`<mcp_instructions><server name="cuba-exec">…</server></mcp_instructions>`. Kilo sends
`notifications/cancelled` for each tools/call request shortly after its result has arrived.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from api_chat import ChatApi
from clients_harness import (
    server_env_of,
    cubactl_setup,
    env_flags,
    SERVER,
    Call,
    Run,
    StandIn,
    installed,
    run_client,
    setup_env,
)

NAME = "kilo"
VERSION = "7.7.7"
PROGRAM = "kilo"
PROMPT = "Use the cuba-exec tools as needed."
PROVIDER = "standin"
MODEL = "standin-model"


def config_dir(home: Path) -> Path:
    """Kilo's user config folder: `$XDG_CONFIG_HOME/kilo` (~/.config/kilo, on every OS)."""
    return home / ".config" / "kilo"


def configure_by_hand(world: Any, home: Path, server_env: Optional[dict[str, str]] = None) -> Path:
    """Writes our MCP entry as a user would, in Kilo's user config `~/.config/kilo/kilo.json`
    (the key `mcp`, a local server run over stdio). At its first start Kilo adds
    `"permission": {"bash": "allow"}` to that file (a one-time migration)."""
    bin_dir = world.shim.parent
    path = config_dir(home) / "kilo.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {}
    if path.exists():
        config = json.loads(path.read_text())
    config.setdefault("$schema", "https://app.kilo.ai/config.json")
    config.setdefault("mcp", {})[SERVER] = {
        "type": "local",
        "command": [str(bin_dir / "cuba-exec")],
        "environment": server_env_of(world) | (server_env or {}),
        "enabled": True,
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def standin_config(url: str) -> dict[str, Any]:
    """What the test adds to the user's config (through `KILO_CONFIG_CONTENT`, merged over the
    config files): the stand-in as the only provider and model, and what would reach the
    network or touch the work folder off."""
    return {
        "$schema": "https://app.kilo.ai/config.json",
        "provider": {
            PROVIDER: {
                # Bundled in the binary (no run-time install).
                "npm": "@ai-sdk/openai-compatible",
                "name": "Stand-in",
                "options": {"baseURL": url + "/v1", "apiKey": "standin-key"},
                "models": {MODEL: {"name": "Stand-in model", "tool_call": True, "limit": {"context": 200000, "output": 8192}}},
            }
        },
        # Only our provider: not the Kilo Gateway (`kilo`) nor any other built-in one.
        "enabled_providers": [PROVIDER],
        "model": f"{PROVIDER}/{MODEL}",
        "small_model": f"{PROVIDER}/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        # No language servers (downloaded on demand), formatters, nor git snapshots of the folder.
        "lsp": False,
        "formatter": False,
        "snapshot": False,
    }


def client_env(world: Any, home: Path, url: str) -> dict[str, str]:
    env = setup_env(world, home)
    # setup_env keeps the caller's KILO_* variables (it knows opencode's names only).
    for k in [k for k in env if k.startswith("KILO")]:
        del env[k]
    env.update(
        KILO_CONFIG_CONTENT=json.dumps(standin_config(url)),
        # Without these two a run looks up models.dev (the catalogue, at start and again when a
        # session starts) and us.i.posthog.com (usage telemetry, on by default; only the value
        # `all` keeps it on). With them the only connection is to the stand-in (strace).
        KILO_DISABLE_MODELS_FETCH="1",
        KILO_TELEMETRY_LEVEL="off",
        KILO_DISABLE_AUTOUPDATE="1",
        # Sharing and the Kilo cloud session sync (both need a Kilo login; off for good measure).
        KILO_DISABLE_SHARE="1",
        KILO_DISABLE_SESSION_INGEST="1",
        KILO_DISABLE_LSP_DOWNLOAD="1",
        # No ~/.claude prompt / skills, no skills fetched from URLs.
        KILO_DISABLE_CLAUDE_CODE="1",
        KILO_DISABLE_EXTERNAL_SKILLS="1",
    )
    if os.environ.get("KILO_PROBE_LOGS"):
        env["KILO_LOG_LEVEL"] = "DEBUG"
    return env


class KiloDriver:
    name = NAME
    version = VERSION
    # `new Client({name: "kilo", version: "7.7.7"}, {capabilities: {roots: {}}})`; it asks for
    # protocol version 2025-11-25.
    client_info = "kilo"

    def __init__(
        self,
        configure: Optional[Any] = None,
        extra_env: Optional[dict[str, str]] = None,
        wrapper: Optional[list[str]] = None,
        extra_args: Optional[list[str]] = None,
        server_env: Optional[dict[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> None:
        # `configure(world, home)` writes our MCP entry (default: `cubactl setup`, as a user
        # would).
        self.configure = configure or (lambda world, home: cubactl_setup(world, home, NAME, *env_flags(server_env)))
        self.extra_env = extra_env or {}
        # A command the client runs under (e.g. strace), and more arguments of its own, for probes.
        self.wrapper = wrapper or []
        self.extra_args = extra_args or []
        self.timeout = timeout

    def installed(self) -> bool:
        return installed(NAME, VERSION, PROGRAM) is not None

    def program(self) -> Path:
        exe = installed(NAME, VERSION, PROGRAM)
        if exe is None:
            raise FileNotFoundError(f"{NAME}@{VERSION} is not installed (scripts/clients install)")
        return exe

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call]) -> Run:
        exe = self.program()
        home.mkdir(parents=True, exist_ok=True)
        workdir.mkdir(parents=True, exist_ok=True)
        self.configure(world, home)
        with StandIn(ChatApi(), script) as standin:
            env = client_env(world, home, standin.url) | self.extra_env
            # Kilo takes its directory from $PWD (inherited from the caller), not from the
            # process's working directory.
            env["PWD"] = str(workdir)
            cmd = [*self.wrapper, str(exe), "run", "--model", f"{PROVIDER}/{MODEL}", *self.extra_args]
            if os.environ.get("KILO_PROBE_LOGS"):
                cmd += ["--print-logs", "--log-level", "DEBUG"]
            # One word per argument: `kilo run` puts an argument that has a space in quotes.
            cmd += PROMPT.split()
            kw = {"timeout": self.timeout} if self.timeout else {}
            return run_client(cmd, env, workdir, standin, **kw)


Driver = KiloDriver
