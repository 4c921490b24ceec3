"""The real Claude Code through the HTTP endpoint (`cuba-exec serve --http`), not a stdio command:
its MCP entry is `{"type": "http", "url": ..., "headers": {"Authorization": "Bearer <token>"}}`,
added as a user adds it (`claude mcp add --scope user --transport http cuba-exec URL --header
"Authorization: Bearer <token>"`, which writes `mcpServers` of `~/.claude.json`).

A scripted conversation with the stand-in model (clients_harness.py, client_claude.py) runs,
starts, lists and kills through the endpoint; the test checks what the model was handed for each
call (our compact view, the command's output) and that the daemon's table (`cubactl ps`) has
every process owned by the token's name, started through the endpoint's process.

A client that is not installed is a skip, and a failure under CI (test_clients.require).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import client_claude
import pytest
from clients_harness import SERVER, Call, setup_env
from conftest import World
from http_server import HttpServer
from test_clients import header, require

# The token's name: the owner of what Claude Code starts through it.
OWNER = "claude-laptop"
ECHO = "echo via-claude-over-http"
SLEEP = "sleep 30"
# A fresh daemon numbers the processes 1, 2, ...: the `start` below is process 2.
SCRIPT = [
    Call("run", {"command": ECHO}),
    Call("start", {"command": SLEEP, "name": "http-sleeper"}),
    Call("list_processes", {}),
    Call("send_signal", {"id": 2, "signal": "KILL"}),
]


@pytest.fixture
def place() -> Iterator[tuple[World, Path, Path, HttpServer]]:
    world = World("legacy")
    home = Path(tempfile.mkdtemp(prefix="cx", dir="/tmp"))
    work = home / "project"
    work.mkdir()
    server = HttpServer(world)
    try:
        yield world, home, work, server
    finally:
        server.stop()
        world.cleanup()
        shutil.rmtree(home, ignore_errors=True)


def http_entry(d: Any, server: HttpServer, token: str) -> Any:
    """A `configure` for the driver: our HTTP entry, added with Claude Code's own command."""

    def configure(world: World, home: Path) -> None:
        auth = f"Authorization: Bearer {token}"
        cmd = [str(d.program()), "mcp", "add", "--scope", "user", "--transport", "http", SERVER, server.url, "--header", auth]
        env = setup_env(world, home) | {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        done = subprocess.run(cmd, env=env, cwd=home, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{cmd[1:3]}: {done.stdout}{done.stderr}"
        entry = json.loads((home / ".claude.json").read_text())["mcpServers"][SERVER]
        assert entry == {"type": "http", "url": server.url, "headers": {"Authorization": f"Bearer {token}"}}, entry

    return configure


def test_claude_code_through_the_http_endpoint(place: Any) -> None:
    world, home, work, server = place
    probe = client_claude.Driver()
    require(probe)
    server.start()
    token = server.token(OWNER)
    d = client_claude.Driver(configure=http_entry(probe, server, token))
    run = d.run(world, home, work, SCRIPT)
    assert not run.record.errors, run.record.errors
    seen = run.seen
    assert len(seen) == len(SCRIPT), (
        f"{len(seen)} of {len(SCRIPT)} results reached the model; rc {run.returncode}; "
        f"stderr: {run.stderr[-2000:]}; stdout: {run.stdout[-2000:]}; endpoint: {server.log_text()[-2000:]}"
    )
    ran, started, listed, killed = seen
    assert all(s.name.startswith(f"mcp__{SERVER}__") for s in seen), [s.name for s in seen]
    assert header(ran.text).startswith("[id:1 exit:0"), ran.text
    assert "via-claude-over-http" in ran.text and not ran.is_error, ran.text
    assert header(started.text).startswith("[id:2 state:running"), started.text
    rows = {line.split()[0]: line for line in listed.text.splitlines() if line.startswith("id:")}
    assert set(rows) == {"id:1", "id:2"}, listed.text
    assert all(f"owner:{OWNER}" in line for line in rows.values()), listed.text
    assert rows["id:1"].endswith(f"$ {ECHO}") and rows["id:2"].endswith(f"$ {SLEEP}"), listed.text
    assert "http-sleeper" in rows["id:2"], listed.text
    assert header(killed.text).startswith("[id:2 state:killed"), killed.text
    # The daemon's table, from a terminal: the token's name owns both, through the endpoint.
    table = json.loads(server.cubactl("ps", "--json", env=world.env | {"NO_COLOR": "1"}))
    assert [(p["id"], p["owner"], p["command"]) for p in table] == [(1, OWNER, ECHO), (2, OWNER, SLEEP)], table
    assert {p["owner_pid"] for p in table} == {server.proc.pid}, table
    deadline = time.monotonic() + 20
    while world.marked(2):
        assert time.monotonic() < deadline, f"the killed process runs on: {world.marked(2)}"
        time.sleep(0.01)
