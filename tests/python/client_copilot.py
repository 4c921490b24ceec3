"""GitHub Copilot CLI (`@github/copilot` on npm: a Node single-executable with a Rust runtime,
`runtime.node`, whose MCP client is rmcp) against the stand-in model.

Copilot CLI runs without GitHub through its BYOK setting ("Custom Model Providers", `copilot help
providers`): `COPILOT_PROVIDER_BASE_URL` makes it use that provider instead of GitHub Copilot's
model routing, with no GitHub authentication, and `COPILOT_OFFLINE=true` turns off everything
else that would reach the network (GitHub authentication, telemetry, web tools, the GitHub MCP
server, auto-update). The provider type `openai` (the default) with the wire API `completions`
(the default) is OpenAI Chat Completions through the OpenAI JS SDK 5.20.1, streamed: `POST
<base>/chat/completions` with `stream: true` and `stream_options.include_usage`, answered with
`chat.completion.chunk` server-sent events and `data: [DONE]`.

`copilot -p PROMPT` runs one prompt non-interactively and exits. A tool call needs a permission
given on the command line there: `--allow-tool=cuba-exec` (the pattern `<mcp-server-name>(tool?)`:
every tool of our server) or `--allow-all-tools`; without one the model reads "Permission denied
because no interactive user response was available. …".

What Copilot does with an MCP tool result before the model sees it (observed by the probe): the
text blocks, then, when the result has `structuredContent`, "\n\n" and that JSON on one line,
appended; a result with `isError: true` gets the prefix `MCP server '<name>': `. Above 20 480
bytes (UTF-8) of that text it writes it whole to `$TMPDIR/<ms>-copilot-tool-output-<hex>.txt`
(deleted at exit) and hands the model a note naming the file with the first 500 characters. Our
tools are offered as `cuba-exec-<tool>`. The server's `instructions` reach the system prompt (as
`<cuba-exec-*>…</cuba-exec-*>` in its `<tools>` section) only for servers on an allowlist of
GitHub's MCP registry, unless `--allow-all-mcp-server-instructions`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Optional

from api_chat import ChatApi
from clients_harness import (
    server_env_of,
    CLIENTS_DIR,
    SERVER,
    Call,
    Run,
    StandIn,
    cubactl_setup,
    env_flags,
    installed,
    run_client,
    setup_env,
)

NAME = "copilot"
VERSION = "1.0.102"
PROGRAM = "copilot"
PROMPT = "Use the cuba-exec tools as needed."
MODEL = "standin-model"


def config_dir(home: Path) -> Path:
    """Copilot's user config folder: `$COPILOT_HOME`, by default `~/.copilot`."""
    return home / ".copilot"


def server_entry(world: Any, server_env: Optional[dict[str, str]] = None) -> dict[str, Any]:
    bin_dir = world.shim.parent
    return {
        # What `copilot mcp add cuba-exec --env K=V -- <cuba-exec>` writes: a local (stdio)
        # server, every tool of it offered.
        "type": "local",
        "command": str(bin_dir / "cuba-exec"),
        "args": [],
        "env": server_env_of(world) | (server_env or {}),
        "tools": ["*"],
    }


def configure_by_hand(world: Any, home: Path, server_env: Optional[dict[str, str]] = None) -> Path:
    """Writes our MCP entry as a user would, in Copilot's user MCP config
    `~/.copilot/mcp-config.json` (the key `mcpServers`; `copilot mcp add` writes the same)."""
    path = config_dir(home) / "mcp-config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    config.setdefault("mcpServers", {})[SERVER] = server_entry(world, server_env)
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def wrap_server(home: Path, wrapper: list[str]) -> Path:
    """Makes our entry in `~/.copilot/mcp-config.json` run its command under `wrapper`:
    `wrapper + [command, *args]`."""
    path = config_dir(home) / "mcp-config.json"
    config = json.loads(path.read_text())
    entry = config["mcpServers"][SERVER]
    entry["args"] = [*wrapper[1:], entry["command"], *entry.get("args", [])]
    entry["command"] = wrapper[0]
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def pkg_cache() -> Path:
    """Where the binary unpacks its bundled JS package (235 MB) before it runs: by default
    `$XDG_CACHE_HOME/copilot/pkg/<platform>/<version>`, i.e. inside each run's temp HOME. Its
    own `COPILOT_PKG_CACHE_HOME` puts it next to the install instead, unpacked once."""
    return CLIENTS_DIR / f"{NAME}@{VERSION}" / "pkg-cache"


def client_env(world: Any, home: Path, url: str, model: str) -> dict[str, str]:
    env = setup_env(world, home)
    for k in [k for k in env if k.startswith(("COPILOT_", "GH_", "GITHUB_"))]:
        del env[k]
    env.update(
        # BYOK: the stand-in is the model provider (type openai, wire API completions: the
        # defaults); no GitHub authentication.
        COPILOT_PROVIDER_BASE_URL=url + "/v1",
        COPILOT_PROVIDER_API_KEY="standin-key",
        COPILOT_MODEL=model,
        # No GitHub login, telemetry, web tools, GitHub MCP server nor update check.
        COPILOT_OFFLINE="true",
        COPILOT_AUTO_UPDATE="false",
        COPILOT_PKG_CACHE_HOME=str(pkg_cache()),
        # Its large-output files go to the OS temp directory: inside the temp HOME, so a killed
        # run leaves none behind.
        TMPDIR=str(home / "tmp"),
    )
    return env


class CopilotDriver:
    name = NAME
    version = VERSION
    # Sent in the `_meta` of every request (it speaks MCP 2026-07-28 with our server:
    # `server/discover`, no initialize): `"io.modelcontextprotocol/clientInfo": {"name":
    # "copilot-cli", "version": "1.0.102"}`.
    client_info = "copilot-cli"

    def __init__(
        self,
        model: str = MODEL,
        configure: str = "cubactl",
        allow: Optional[list[str]] = None,
        instructions: bool = True,
        extra_args: Optional[list[str]] = None,
        wrapper: Optional[list[str]] = None,
        extra_env: Optional[dict[str, str]] = None,
        server_env: Optional[dict[str, str]] = None,
        timeout: Optional[float] = None,
        experimental: bool = False,
        server_wrapper: Optional[list[str]] = None,
        api: Optional[Callable[[str], Any]] = None,
    ) -> None:
        self.model = model
        # "cubactl": `cubactl setup --client copilot`, as a user would; "hand": configure_by_hand.
        self.configure = configure
        # The permission for our tools in a `-p` run.
        self.allow = allow if allow is not None else [f"--allow-tool={SERVER}"]
        # `--allow-all-mcp-server-instructions`: our instructions in the system prompt.
        self.instructions = instructions
        self.extra_args = extra_args or []
        # A command the client runs under (e.g. strace), for probes.
        self.wrapper = wrapper or []
        self.extra_env = extra_env or {}
        self.server_env = server_env
        self.timeout = timeout
        # `--experimental`: Copilot's experimental features; with it Copilot declares the MCP
        # tasks extension (`io.modelcontextprotocol/tasks`) in every request's capabilities.
        # (It reads a task answer from a tool listed `taskSupport: "required"` either way.)
        self.experimental = experimental
        # A command our server's entry runs `cuba-exec` under (its command and arguments
        # follow it), e.g. a logging or task-answering proxy, for probes and tests.
        self.server_wrapper = server_wrapper or []
        # The stand-in's model API, from the model name (default ChatApi).
        self.api = api or ChatApi

    @staticmethod
    def installed() -> bool:
        return installed(NAME, VERSION, PROGRAM) is not None

    def program(self) -> Path:
        exe = installed(NAME, VERSION, PROGRAM)
        if exe is None:
            raise FileNotFoundError(f"{NAME}@{VERSION} is not installed (scripts/clients install)")
        return exe

    def command(self, logs: Path) -> list[str]:
        cmd = [*self.wrapper, str(self.program()), "-p", PROMPT, *self.allow]
        if self.instructions:
            cmd.append("--allow-all-mcp-server-instructions")
        cmd += [
            "--no-auto-update",
            "--disable-builtin-mcps",
            "--disable-client-telemetry",
            "--no-color",
            "--log-dir",
            str(logs),
        ]
        if os.environ.get("COPILOT_PROBE_LOGS"):
            cmd += ["--log-level", "all"]
        if self.experimental:
            cmd.append("--experimental")
        return cmd + self.extra_args

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call]) -> Run:
        self.program()
        home.mkdir(parents=True, exist_ok=True)
        workdir.mkdir(parents=True, exist_ok=True)
        if self.configure == "cubactl":
            cubactl_setup(world, home, NAME, *env_flags(self.server_env))
        else:
            configure_by_hand(world, home, self.server_env)
        if self.server_wrapper:
            wrap_server(home, self.server_wrapper)
        pkg_cache().mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)
        with StandIn(self.api(self.model), script) as standin:
            env = client_env(world, home, standin.url, self.model) | self.extra_env
            kw = {"timeout": self.timeout} if self.timeout else {}
            return run_client(self.command(home / "logs"), env, workdir, standin, **kw)


Driver = CopilotDriver
