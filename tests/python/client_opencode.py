"""opencode (opencode-ai on npm, a Bun-compiled native binary) against the stand-in model.

The model is a provider of our own in opencode's config, served by the AI SDK's
`@ai-sdk/openai-compatible` package (bundled in the binary: nothing is installed at run time),
so the wire API is OpenAI Chat Completions, streamed: `POST <baseURL>/chat/completions` with
`stream: true`, answered with `chat.completion.chunk` server-sent events and `data: [DONE]`.

What opencode does with an MCP tool result before the model sees it (read in its code, checked
by the probe): the result's text blocks (and embedded text resources) are joined with "\n"; an
empty `content` with `structuredContent` becomes that JSON; `isError: true` makes its execute
throw `Error(<the non-blank text blocks joined with "\n">)`: the model reads exactly that text
(no prefix, no flag in Chat Completions) and it is never cut. A successful result's text goes
through opencode's `Truncate.output`: above 2000 lines or 51200 bytes (config
`tool_output.max_lines` / `max_bytes`) it keeps the head (whole lines), appends
`\n\n...N lines truncated...\n\n` (or `bytes`) and a note naming the file under
`$XDG_DATA_HOME/opencode/tool-output/` where it saved the whole text. Our tools are offered as
`cuba-exec_<tool>`; the server's `instructions` are in the system prompt, in
`<mcp_instructions><server name="cuba-exec">…</server></mcp_instructions>`.
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
    Pinned,
    Run,
    StandIn,
    run_client,
    setup_env,
)

NAME = "opencode"
VERSION = "1.18.33"
BINARY = "opencode"
PROMPT = "Use the cuba-exec tools as needed."
PROVIDER = "standin"
MODEL = "standin-model"


def config_dir(home: Path) -> Path:
    """opencode's user config folder: `$XDG_CONFIG_HOME/opencode` (~/.config/opencode)."""
    return home / ".config" / "opencode"


def configure_by_hand(world: Any, home: Path, server_env: Optional[dict[str, str]] = None) -> Path:
    """Writes our MCP entry as a user would, in opencode's user config
    `~/.config/opencode/opencode.json` (the key `mcp`, a local server run over stdio)."""
    bin_dir = world.shim.parent
    path = config_dir(home) / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {}
    if path.exists():
        config = json.loads(path.read_text())
    config.setdefault("$schema", "https://opencode.ai/config.json")
    config.setdefault("mcp", {})[SERVER] = {
        "type": "local",
        "command": [str(bin_dir / "cuba-exec")],
        "environment": server_env_of(world) | (server_env or {}),
        "enabled": True,
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def standin_config(url: str) -> dict[str, Any]:
    """What the test adds to the user's config (through `OPENCODE_CONFIG_CONTENT`, merged over
    the config files): the stand-in as the only provider and model, and everything that would
    reach the network off."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                # Bundled in the binary (no run-time install); the default for a provider that
                # models.dev does not know.
                "npm": "@ai-sdk/openai-compatible",
                "name": "Stand-in",
                "options": {"baseURL": url + "/v1", "apiKey": "standin-key"},
                "models": {MODEL: {"name": "Stand-in model", "tool_call": True, "limit": {"context": 200000, "output": 8192}}},
            }
        },
        # Only our provider: the built-in `opencode` provider has free models that need no key
        # and would otherwise be candidates (e.g. for the title).
        "enabled_providers": [PROVIDER],
        "model": f"{PROVIDER}/{MODEL}",
        "small_model": f"{PROVIDER}/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "lsp": False,
        "formatter": False,
        "snapshot": False,
    }


def npm_offline(home: Path) -> None:
    """At every start opencode runs an npm install (npm's Arborist, bundled) of
    `@opencode-ai/plugin@<its version>` into each config folder (~/.config/opencode) whose
    package-lock.json lacks it, in the background: a fetch from registry.npmjs.org. npm's own
    `offline` setting, in the temp HOME's ~/.npmrc, makes that install fail at once instead
    (opencode logs "background dependency install failed" and goes on)."""
    (home / ".npmrc").write_text("offline=true\n")


# What is turned off: the models.dev catalogue fetch (at start and hourly; the bundled snapshot
# is used), auto-update, sharing, language-server downloads, the ~/.claude prompt and skills,
# and skills fetched from URLs.
OFF = ("MODELS_FETCH", "AUTOUPDATE", "SHARE", "LSP_DOWNLOAD", "CLAUDE_CODE", "EXTERNAL_SKILLS")


def client_env(world: Any, home: Path, url: str, prefix: str = "OPENCODE", config: Optional[dict[str, Any]] = None) -> dict[str, str]:
    """The run's environment: `config` (default: the stand-in's) merged over the config files
    through `<prefix>_CONFIG_CONTENT`, and `<prefix>_DISABLE_*` for each of `OFF` (Kilo, a fork,
    has opencode's variables under its own prefix)."""
    env = setup_env(world, home)
    env[f"{prefix}_CONFIG_CONTENT"] = json.dumps(config or standin_config(url))
    env.update({f"{prefix}_DISABLE_{name}": "1" for name in OFF})
    if os.environ.get(f"{prefix}_PROBE_LOGS"):
        env[f"{prefix}_LOG_LEVEL"] = "DEBUG"
    return env


class OpencodeDriver(Pinned):
    name = NAME
    version = VERSION
    program_name = BINARY
    # `new Client({name: "opencode", version: "1.18.33"}, {capabilities: {roots: {}}})`.
    client_info = "opencode"
    # Set, the run prints the client's debug log (for probes).
    logs_var = "OPENCODE_PROBE_LOGS"

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
        self.configure = configure or (lambda world, home: cubactl_setup(world, home, self.name, *env_flags(server_env)))
        self.extra_env = extra_env or {}
        # A command the client runs under (e.g. strace), and more arguments of its own, for probes.
        self.wrapper = wrapper or []
        self.extra_args = extra_args or []
        self.timeout = timeout

    def prepare(self, home: Path) -> None:
        """What the client's home needs before a run (opencode: npm offline)."""
        npm_offline(home)

    def client_env(self, world: Any, home: Path, url: str) -> dict[str, str]:
        return client_env(world, home, url)

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call]) -> Run:
        exe = self.program()
        home.mkdir(parents=True, exist_ok=True)
        workdir.mkdir(parents=True, exist_ok=True)
        self.configure(world, home)
        self.prepare(home)
        with StandIn(ChatApi(), script) as standin:
            env = self.client_env(world, home, standin.url) | self.extra_env
            # opencode (and Kilo) take their directory from $PWD (inherited from the caller),
            # not from the process's working directory.
            env["PWD"] = str(workdir)
            cmd = [*self.wrapper, str(exe), "run", "--model", f"{PROVIDER}/{MODEL}", *self.extra_args]
            if os.environ.get(self.logs_var):
                cmd += ["--print-logs", "--log-level", "DEBUG"]
            # One word per argument: `run` puts an argument that has a space in quotes.
            cmd += PROMPT.split()
            kw = {"timeout": self.timeout} if self.timeout else {}
            return run_client(cmd, env, workdir, standin, **kw)


Driver = OpencodeDriver
