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
from pathlib import Path
from typing import Any, Optional

import client_opencode
from clients_harness import SERVER, server_env_of

NAME = "kilo"
VERSION = "7.7.7"
PROGRAM = "kilo"
SCHEMA = "https://app.kilo.ai/config.json"


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
    config.setdefault("$schema", SCHEMA)
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
    config files): opencode's (the stand-in as the only provider and model, not the Kilo
    Gateway nor any other built-in one; nothing that reaches the network or touches the work
    folder), under Kilo's schema."""
    return client_opencode.standin_config(url) | {"$schema": SCHEMA}


def client_env(world: Any, home: Path, url: str) -> dict[str, str]:
    env = client_opencode.client_env(world, home, url, "KILO", standin_config(url))
    env.update(
        # Without it and KILO_DISABLE_MODELS_FETCH a run looks up us.i.posthog.com (usage
        # telemetry, on by default; only the value `all` keeps it on) and models.dev. With
        # them the only connection is to the stand-in (strace).
        KILO_TELEMETRY_LEVEL="off",
        # The Kilo cloud session sync (it needs a Kilo login; off for good measure).
        KILO_DISABLE_SESSION_INGEST="1",
    )
    return env


class KiloDriver(client_opencode.OpencodeDriver):
    """opencode's driver with Kilo's names: `kilo run`, `KILO_*` variables, no npm install."""

    name = NAME
    version = VERSION
    program_name = PROGRAM
    # `new Client({name: "kilo", version: "7.7.7"}, {capabilities: {roots: {}}})`; it asks for
    # protocol version 2025-11-25.
    client_info = "kilo"
    logs_var = "KILO_PROBE_LOGS"

    def prepare(self, home: Path) -> None:
        """Nothing: Kilo installs its plugin package only for a `file://` plugin."""

    def client_env(self, world: Any, home: Path, url: str) -> dict[str, str]:
        return client_env(world, home, url)


Driver = KiloDriver
