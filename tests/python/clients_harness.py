"""What a real coding client hands the model: the stand-in model server and the driver contract.

A test starts a `StandIn` on 127.0.0.1 speaking one client's model API (an `Api`: Anthropic
Messages, OpenAI Responses or Chat Completions, Gemini), points the real client program at it
through the client's own base-URL setting, and gives it a script: the tool calls the "model"
makes, one per turn. On every request of the main conversation the stand-in reads what the
client passes back for the tool calls made so far (`Seen`) and answers with the next call, or
with a closing text once the script is done. Requests that are not the main conversation (a
title, a summary, a quota check) get a short text answer. Every request is recorded.

Nothing of the client is mocked: it launches the real `cuba-exec` over stdio, from the MCP
entry that `cubactl setup` writes, and talks to a private `cubad` (the `World` of conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional, Protocol

REPO = Path(__file__).resolve().parents[2]
# Where the pinned clients are installed (scripts/clients install); kept between runs.
CLIENTS_DIR = Path(os.environ.get("CUBA_EXEC_CLIENTS_DIR") or Path.home() / ".cache" / "cuba-exec" / "clients")
# Seconds one client run (a whole scripted conversation) may take.
CLIENT_TIMEOUT = 240.0
SERVER = "cuba-exec"


@dataclass
class Call:
    """One tool call the stand-in model makes: our tool's name and its arguments."""

    tool: str
    args: dict[str, Any]


@dataclass
class Seen:
    """A tool result as the client handed it to the model."""

    call_id: str
    # The client's name of the tool (e.g. `mcp__cuba-exec__run`), as the model called it.
    name: str
    # Everything the model reads of the result, as one string (text blocks joined with "\n").
    text: str
    # The result exactly as it came in the request (a block, a part, a message).
    raw: Any
    # The client marked the result as an error (Anthropic's `is_error`), where its API can.
    is_error: Optional[bool] = None


@dataclass
class Conversation:
    """What an `Api` finds in a request of the main conversation."""

    # The results of the tool calls made so far, in order.
    results: list[Seen]
    # The tools offered to the model: client's name -> the whole declaration as sent.
    tools: dict[str, Any]
    # Everything the client put around the conversation that the model reads (system prompt,
    # the first user turn), as text: where the server's `instructions` may appear.
    preamble: str


class Api(Protocol):
    """One model wire API, as the stand-in speaks it."""

    def conversation(self, path: str, body: Any) -> Optional[Conversation]:
        """The main conversation's state, or None for a request that is not part of it."""

    def tool_call(self, h: BaseHTTPRequestHandler, path: str, body: Any, name: str, args: dict[str, Any], call_id: str) -> None:
        """Answers with one call of the client's tool `name`."""

    def text(self, h: BaseHTTPRequestHandler, path: str, body: Any, text: str) -> None:
        """Answers with a plain closing text."""

    def other(self, h: BaseHTTPRequestHandler, method: str, path: str, body: Any) -> bool:
        """Answers a request that is not a model turn (a model list, token counting); False if
        it is a model turn."""


def tool_name(tools: dict[str, Any], ours: str) -> str:
    """The client's name for our tool `ours`: the one offered name that is ours or ends in it
    after the client's separator (`mcp__cuba-exec__run`, `cuba-exec_run`, `cuba-exec__run`)."""
    if ours in tools:
        return ours
    found = [n for n in tools if n.endswith(ours) and not n[: -len(ours)][-1:].isalnum() and "cuba" in n]
    if len(found) != 1:
        raise KeyError(f"tool {ours!r} not offered (or ambiguous): {sorted(tools)}")
    return found[0]


@dataclass
class Record:
    """Everything the stand-in saw."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    # The last state of the main conversation (the fullest one).
    last: Optional[Conversation] = None
    errors: list[str] = field(default_factory=list)


class StandIn:
    """A scripted model on 127.0.0.1:<free port>. Use as a context manager."""

    def __init__(self, api: Api, script: list[Call], closing: str = "All done.") -> None:
        self.api = api
        self.script = script
        self.closing = closing
        self.record = Record()
        self.lock = threading.Lock()
        # The handler class reaches the stand-in through this name. A turn is answered from the
        # conversation it carries, so a client that sends one twice gets the same call again.
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                if self.headers.get("Content-Encoding") == "gzip":
                    import gzip

                    raw = gzip.decompress(raw)
                elif self.headers.get("Content-Encoding") == "zstd":
                    raise ValueError("zstd request bodies are not supported")
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode(errors="replace")

            def _serve(self, method: str) -> None:
                try:
                    body = self._body()
                    standin.serve(self, method, self.path, body)
                except Exception as e:  # recorded: a test reads it
                    standin.record.errors.append(f"{method} {self.path}: {e!r}")
                    try:
                        self.send_response(500)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    except OSError:
                        pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "StandIn":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def serve(self, h: BaseHTTPRequestHandler, method: str, path: str, body: Any) -> None:
        now = time.time()
        with self.lock:
            index = len(self.record.requests)
            self.arrived(now, index)
            self.record.requests.append({"method": method, "path": path, "headers": dict(h.headers), "body": body})
        try:
            if self.api.other(h, method, path, body):
                return
            conv = self.api.conversation(path, body)
            if conv is None:
                self.api.text(h, path, body, "OK.")
                return
            with self.lock:
                self.turn(now, conv, index)
                if self.record.last is None or len(conv.results) >= len(self.record.last.results):
                    self.record.last = conv
            step = len(conv.results)
            if step < len(self.script) and not self.finished(conv):
                call = self.script[step]
                name = tool_name(conv.tools, call.tool) if conv.tools else call.tool
                self.api.tool_call(h, path, body, name, self.args_for(call, conv), f"call_{step + 1:02d}")
            else:
                self.api.text(h, path, body, self.closing)
        finally:
            self.served()

    # Hooks for a stand-in that records or decides more (client_claude_tty.py, measure_tasks.py);
    # here they do nothing.

    def arrived(self, now: float, index: int) -> None:
        """A request came, the `index`-th (under the lock, before it is recorded)."""

    def turn(self, now: float, conv: Conversation, index: int) -> None:
        """A request of the main conversation (under the lock)."""

    def finished(self, conv: Conversation) -> bool:
        """Whether the script ends here, before its last call."""
        return False

    def args_for(self, call: Call, conv: Conversation) -> dict[str, Any]:
        """The arguments the model gives `call`, given what it read so far."""
        return call.args

    def served(self) -> None:
        """A request was answered."""

    def seen(self) -> list[Seen]:
        """The results of the fullest conversation the client sent."""
        return self.record.last.results if self.record.last else []


# --- helpers for APIs that stream -------------------------------------------------------------


def send_json(h: BaseHTTPRequestHandler, value: Any, status: int = 200) -> None:
    data = json.dumps(value).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)
    h.wfile.flush()


def send_sse(h: BaseHTTPRequestHandler, events: list[tuple[Optional[str], Any]]) -> None:
    """Server-sent events (`event:` name or None, JSON data), then the connection closes."""
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Cache-Control", "no-cache")
    h.send_header("Connection", "close")
    h.end_headers()
    out = []
    for name, data in events:
        if name is not None:
            out.append(f"event: {name}\n")
        out.append(f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    h.wfile.write("".join(out).encode())
    h.wfile.flush()
    h.close_connection = True


# --- running a client -------------------------------------------------------------------------


@dataclass
class Run:
    """One client run: its exit, its output, and what the stand-in saw."""

    returncode: int
    stdout: str
    stderr: str
    seen: list[Seen]
    record: Record


def cubactl_setup(world: Any, home: Path, client: str, *extra: str) -> subprocess.CompletedProcess:
    """Writes `client`'s MCP entry for our server under `home` as a user would: `cubactl setup`,
    with this test's private daemon in the entry's environment."""
    bin_dir = world.shim.parent
    env = setup_env(world, home)
    cmd = [
        str(bin_dir / "cubactl"),
        "setup",
        "--client",
        client,
        "--bin-dir",
        str(bin_dir),
        *env_flags(server_env_of(world)),
        *extra,
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"{cmd}: {done.stdout}{done.stderr}"
    return done


def server_env_of(world: Any) -> dict[str, str]:
    """Our server's environment in a client's entry: this test's private daemon."""
    bin_dir = world.shim.parent
    return {
        "CUBA_EXEC_SOCKET": str(world.socket),
        "CUBA_EXEC_STATE_DIR": str(world.state),
        "CUBA_EXEC_DAEMON": str(bin_dir / "cubad"),
        "CUBA_EXEC_SHUTDOWN_TIMEOUT": "500ms",
    }


def env_flags(env: Optional[dict[str, str]]) -> list[str]:
    """`--env K=V` arguments of `cubactl setup` for more variables in our server's entry."""
    return [a for k, v in (env or {}).items() for a in ("--env", f"{k}={v}")]


def setup_env(world: Any, home: Path) -> dict[str, str]:
    """The environment of a client (and of `cubactl setup`) whose home is `home`: nothing of
    the developer's own configuration reaches it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUBA_EXEC_", "XDG_", "ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "CODEX_", "CLAUDE_", "OPENCODE", "KILO", "QWEN_", "DASHSCOPE_", "CLINE_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_CACHE_HOME=str(home / ".cache"),
        # Plain output: what a client prints is read as text.
        NO_COLOR="1",
        TERM="dumb",
    )
    env.pop("RUST_BACKTRACE", None)
    return env


def run_client(cmd: list[str], env: dict[str, str], cwd: Path, standin: StandIn, timeout: float = CLIENT_TIMEOUT) -> Run:
    """Runs the client in a process group of its own; on timeout (or any exit) the whole group
    is killed, so no client or server process outlives the test."""
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        err += f"\n[killed after {timeout} s]"
        return Run(-9, out, err, standin.seen(), standin.record)
    finally:
        kill_group(proc.pid)
    return Run(proc.returncode, out, err, standin.seen(), standin.record)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def installed(name: str, version: str, binary: str) -> Optional[Path]:
    """The pinned client's program, where `scripts/clients install` put it."""
    exe = CLIENTS_DIR / f"{name}@{version}" / "node_modules" / ".bin" / binary
    return exe if exe.exists() else None


def merge_settings(path: Path, patch: dict[str, Any]) -> Path:
    """Merges `patch` into the JSON settings file `path` one level deep (a section's keys are
    added to the section), as a user editing a client's settings would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text()) if path.exists() else {}
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


class Pinned:
    """The pinned program of a driver: its `name`, `version` and `program_name` (the command
    in `node_modules/.bin`) as `scripts/clients install` puts it."""

    name: str
    version: str
    program_name: str

    def installed(self) -> bool:
        return installed(self.name, self.version, self.program_name) is not None

    def program(self) -> Path:
        exe = installed(self.name, self.version, self.program_name)
        if exe is None:
            raise FileNotFoundError(f"{self.name}@{self.version} is not installed (scripts/clients install)")
        return exe


# A driver per client (client_*.py) provides this.
class Driver(Protocol):
    name: str  # as `cubactl setup --client` knows it
    version: str
    # The client's `clientInfo.name`, as our server receives it.
    client_info: str

    def installed(self) -> bool:
        """The pinned program is where `scripts/clients install` puts it."""

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call]) -> Run:
        """Configures the client under `home` (through `cubactl_setup`) and runs one scripted
        conversation with the stand-in; returns what the model was handed."""

