"""The real `cuba-exec serve --http` beside a `World` (conftest.py), for the tests that reach it
over HTTP: the Python SDK's streamable HTTP client (test_http.py) and Claude Code
(test_client_http.py).

`HttpServer(world)` writes its own config (`[http] listen = "127.0.0.1:0"`: an ephemeral port)
and tokens file in the world's dir, and starts the endpoint with the world's socket and state
dir; the endpoint starts the world's `cubad` (`CUBA_EXEC_DAEMON`) when none runs, so
`World.cleanup` kills that daemon and its processes as usual. `start()` returns once the
endpoint serves: the only event is `http.json` in the state dir, written once it listens,
polled under a bound. `stop()` ends it: SIGTERM, then SIGKILL if it is still there after a
bound.

`RawSession` makes a 2025-06-18 session by hand, for what the SDK never does: cut a call's
connection without cancelling it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

import httpx2
from conftest import CALL_TIMEOUT, World, bin_dir
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import Implementation
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

# Seconds the endpoint may take to serve, and to end on SIGTERM.
START_TIMEOUT = 20.0
STOP_TIMEOUT = 5.0


class HttpServer:
    """One world's `cuba-exec serve --http`."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.config = world.dir / "http-config.toml"
        self.tokens = world.dir / "tokens.toml"
        self.log = world.dir / "http.log"
        self.status = world.state / "http.json"
        self.env = world.env | {
            "CUBA_EXEC_CONFIG": str(self.config),
            "CUBA_EXEC_TOKENS": str(self.tokens),
            "NO_COLOR": "1",
        }
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""

    def start(self) -> "HttpServer":
        self.config.write_text('[http]\nlisten = "127.0.0.1:0"\n')
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [str(self.world.shim), "serve", "--http"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            # Written once the port is bound: created, then filled, so a read may find it empty
            # or partial (tried again); a file of another process (its pid) is not this one's.
            try:
                doc = json.loads(self.status.read_text())
            except (OSError, ValueError):
                doc = None
            if doc and doc.get("pid") == self.proc.pid:
                self.url = doc["url"]
                break
            code = self.proc.poll()
            assert code is None, f"cuba-exec serve --http ended with {code}: {self.log_text()}"
            assert time.monotonic() < deadline, f"not serving after {START_TIMEOUT} s: {self.log_text()}"
            time.sleep(0.01)
        assert self.url.startswith("http://127.0.0.1:") and self.url.endswith("/mcp"), self.url
        return self

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT (the group: nothing of it outlives the test;
        the daemon it started has a session of its own, which World.cleanup kills)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(timeout=STOP_TIMEOUT)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def cubactl(self, *args: str, env: Optional[dict[str, str]] = None) -> str:
        """`cubactl ARGS`' stdout with this endpoint's environment (or `env`); it must
        succeed."""
        cmd = [str(bin_dir() / "cubactl"), *args]
        done = subprocess.run(cmd, env=env or self.env, capture_output=True, text=True, timeout=CALL_TIMEOUT)
        assert done.returncode == 0, f"{cmd}: {done.stdout}{done.stderr}"
        return done.stdout

    def token(self, name: str, *scope: str) -> str:
        """A new token `name` (`cubactl token create NAME SCOPE...`)."""
        token = self.cubactl("token", "create", name, *scope).strip()
        assert token and " " not in token and "\n" not in token, token
        return token

    @asynccontextmanager
    async def client(
        self,
        token: Optional[str],
        name: str = "pytest-http",
        on_response: Optional[Callable[[httpx2.Response], Awaitable[None]]] = None,
        elicitation_callback: Optional[Any] = None,
    ) -> AsyncIterator[Client]:
        """A connected SDK client of the endpoint in the world's mode, sending `token` as its
        bearer (none when None); checks the negotiated version. `on_response` is called with
        each HTTP response once its headers are in (its body, a stream, still unread)."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else None
        timeout = httpx2.Timeout(CALL_TIMEOUT, read=2 * CALL_TIMEOUT)
        async with create_mcp_http_client(headers=headers, timeout=timeout) as http:
            if on_response is not None:
                http.event_hooks = {"response": [on_response]}
            client = Client(
                streamable_http_client(self.url, http_client=http),
                mode=self.world.mode,
                client_info=Implementation(name=name, version="0.0.1"),
                read_timeout_seconds=CALL_TIMEOUT,
                elicitation_callback=elicitation_callback,
            )
            async with client:
                if self.world.mode == "legacy":
                    assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS, client.protocol_version
                else:
                    assert client.protocol_version == self.world.mode
                yield client


# --- by hand: what the SDK never does (no token, a connection cut without a cancel) ----------

# The era of the requests made by hand: a session (`initialize`, `Mcp-Session-Id`).
LEGACY = "2025-06-18"


def raw_post(url: str, headers: dict[str, str], body: bytes = b"{}") -> tuple[int, dict[str, str], str]:
    """One POST with the standard library: status, headers (lowercase names), body."""
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=CALL_TIMEOUT) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode(errors="replace")


def message(body: str) -> Any:
    """The JSON-RPC reply in a body: the body itself, or the last `data:` line of an SSE
    stream that holds one."""
    try:
        return json.loads(body)
    except ValueError:
        pass
    found = None
    for line in body.splitlines():
        if line.startswith("data:"):
            try:
                m = json.loads(line[5:].strip())
            except ValueError:
                continue
            if isinstance(m, dict) and "id" in m:
                found = m
    assert found is not None, f"no JSON-RPC reply in {body!r}"
    return found


class RawSession:
    """A 2025-06-18 session of `token`, made by hand (initialize, then initialized)."""

    def __init__(self, server: HttpServer, token: str, capabilities: Optional[dict[str, Any]] = None) -> None:
        self.url = server.url
        self.token = token
        self.next_id = 1
        self.id: Optional[str] = None
        init = {"protocolVersion": LEGACY, "capabilities": capabilities or {}, "clientInfo": {"name": "raw-http", "version": "0"}}
        status, headers, body = self.rpc("initialize", init)
        assert status == 200, (status, body)
        self.id = headers.get("mcp-session-id")
        assert self.id, headers
        status, _, body = raw_post(self.url, self.headers(), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        assert status == 202, (status, body)

    def headers(self) -> dict[str, str]:
        h = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LEGACY,
        }
        if self.id is not None:
            h["Mcp-Session-Id"] = self.id
        return h

    def body(self, method: str, params: Any) -> bytes:
        self.next_id += 1
        return json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()

    def rpc(self, method: str, params: Any) -> tuple[int, dict[str, str], str]:
        return raw_post(self.url, self.headers(), self.body(method, params))

    def call(self, tool: str, **args: Any) -> Any:
        """A tool call's result (`structuredContent`, `content`, `isError`)."""
        status, _, body = self.rpc("tools/call", {"name": tool, "arguments": args})
        assert status == 200, (status, body)
        reply = message(body)
        assert "result" in reply, reply
        return reply["result"]

    def begin_call(self, tool: str, **args: Any) -> socket.socket:
        """A tool call whose reply has begun (its status line read: 200) and is left unread on
        the returned connection: a call in flight until the connection is closed."""
        body = self.body("tools/call", {"name": tool, "arguments": args})
        parts = urllib.parse.urlsplit(self.url)
        assert parts.hostname and parts.port
        sock = socket.create_connection((parts.hostname, parts.port), timeout=CALL_TIMEOUT)
        head = f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in self.headers().items())
        sock.sendall(head.encode() + b"\r\n" + body)
        status = b""
        while len(status) < 12:
            chunk = sock.recv(12 - len(status))
            assert chunk, f"the connection closed before a reply: {status!r}"
            status += chunk
        assert status == b"HTTP/1.1 200", status
        return sock
