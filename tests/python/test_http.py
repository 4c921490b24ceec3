"""The HTTP endpoint (`cuba-exec serve --http`) through the official Python SDK's streamable HTTP
client, in both protocol generations (the `world` fixture's `mode`): sessions with
`Mcp-Session-Id` (legacy) and 2026-07-28 stateless requests.

Each test gets its own endpoint (http_server.py) on an ephemeral loopback port, with its own
config and tokens file, in front of the world's private `cubad`, which the endpoint starts. A
token (`cubactl token create`) is its own caller: what it starts is owned by the token's name,
in its directory, narrowed to its commands; a request without a known token gets 401 naming the
RFC 9728 metadata document. A client that goes away leaves its processes running; another
session of the same token reads on from a cursor. A cancelled synchronous `run` stops its
process (DESIGN §4; cancelling at 2026-07-28 is closing the request's stream), while in a
session a connection that is merely cut is no cancellation.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from typing import Any, Iterator

import anyio
import pytest
from conftest import CALL_TIMEOUT, World
from http_server import HttpServer, RawSession, raw_post
from mcp.shared.exceptions import MCPError
from test_mcp import call, limited, ok, rows, sc, text, wait_for

pytestmark = pytest.mark.anyio

# A token of the right form that was never issued.
UNKNOWN_TOKEN = "cubatok_" + "0" * 64




def ps(http: HttpServer, world: World) -> list[dict[str, Any]]:
    """`cubactl ps --json` with the world's environment (its socket only: no config, no token)."""
    return json.loads(http.cubactl("ps", "--json", env=world.env | {"NO_COLOR": "1"}))


def leaves(e: BaseException) -> list[BaseException]:
    """The exceptions in `e`, exception groups flattened."""
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in leaves(sub)]
    return [e]


@limited()
async def test_a_token_runs_as_its_name_in_the_shared_table(world: World, http: HttpServer) -> None:
    token = http.token("laptop")
    async with http.client(token) as c:
        r = await ok(c, "run", command="echo hi")
        assert r["output"] == "hi\n" and r["exit_code"] == 0, r
        listed = await call(c, "list_processes")
        line = next((l for l in text(listed).splitlines() if l.startswith(f"id:{r['id']} ")), "")
        assert "owner:laptop" in line and "$ echo hi" in line, text(listed)
        assert [(p["id"], p["owner"]) for p in sc(listed)["processes"]] == [(r["id"], "laptop")]
    # The same table from a terminal and from a stdio client of the same daemon.
    table = ps(http, world)
    assert [(p["id"], p["owner"], p["command"]) for p in table] == [(r["id"], "laptop", "echo hi")], table
    assert table[0]["owner_pid"] == http.proc.pid, table  # type: ignore[union-attr]
    async with world.client("stdio-agent") as stdio:
        assert [(p["id"], p["owner"]) for p in await rows(stdio)] == [(r["id"], "laptop")]


@limited()
async def test_a_token_scope_sets_its_directory_and_commands(world: World, http: HttpServer) -> None:
    root = world.dir / "root"
    root.mkdir()
    token = http.token("phone", "--roots", str(root), "--allow", "echo,pwd")
    async with http.client(token) as c:
        here = await ok(c, "run", command="pwd")
        assert here["output"] == f"{os.path.realpath(root)}\n", here
        refused = await call(c, "run", command="ls")
        assert refused.is_error and "BLOCKED" in text(refused), text(refused)
        assert "ls" in text(refused) and "allowlist" in text(refused), text(refused)
        assert (await ok(c, "run", command="echo allowed"))["output"] == "allowed\n"
    # `ls` never started: only the two allowed commands are in the table.
    assert sorted(p["command"] for p in ps(http, world)) == ["echo allowed", "pwd"]


@limited()
async def test_no_token_or_an_unknown_one_is_refused(world: World, http: HttpServer) -> None:
    doc_url = http.url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource"
    status, headers, body = raw_post(http.url, {})
    assert status == 401, (status, body)
    assert headers.get("www-authenticate") == f'Bearer resource_metadata="{doc_url}"', headers
    status, headers, body = raw_post(http.url, {"Authorization": f"Bearer {UNKNOWN_TOKEN}"})
    assert status == 401, (status, body)
    challenge = headers.get("www-authenticate", "")
    assert challenge.startswith(f'Bearer resource_metadata="{doc_url}"'), challenge
    assert 'error="invalid_token"' in challenge, challenge
    # The document it names says which resource this is.
    with urllib.request.urlopen(doc_url, timeout=CALL_TIMEOUT) as r:
        doc = json.loads(r.read())
    assert doc["resource"] == http.url and doc["bearer_methods_supported"] == ["header"], doc

    # The SDK: its connect (legacy: initialize) or first call (2026-07-28) fails on the 401.
    for token in (None, UNKNOWN_TOKEN):
        statuses: list[int] = []

        async def seen(response: Any) -> None:
            statuses.append(response.status_code)

        with pytest.raises(Exception) as caught:
            with anyio.fail_after(CALL_TIMEOUT):
                async with http.client(token, on_response=seen) as c:
                    await c.call_tool("run", {"command": "echo should-not-run"})
        assert any(isinstance(e, MCPError) for e in leaves(caught.value)), repr(caught.value)
        assert statuses and set(statuses) == {401}, statuses

    # A known token gets through; nothing the refused ones asked for ran.
    async with http.client(http.token("rightful")) as c:
        assert await rows(c) == []


@limited(90)
async def test_a_client_dropped_mid_wait_leaves_its_process_to_a_new_session(world: World, http: HttpServer) -> None:
    token = http.token("flaky")
    # A process that prints `one` and reads a line, once let through a gate (a FIFO the test
    # opens): until then it neither prints nor reads its stdin, so a `wait` on it blocks (one
    # on a process waiting for input would return at once).
    gate = world.dir / "gate"
    os.mkfifo(gate)
    command = f"read g < {gate}; echo one; read x; echo two:$x; sleep 60"
    in_flight = anyio.Event()
    returned: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        in_flight.set()

    async with http.client(token) as first:
        pid_id = (await ok(first, "start", command=command))["id"]

        async def waiting() -> None:
            args = {"id": pid_id, "until": "never-printed", "timeout_ms": 60_000}
            returned.append(await first.call_tool("wait", args, progress_callback=on_progress))

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiting)
            # The wait's first progress notification: it is blocked in the server.
            with anyio.fail_after(CALL_TIMEOUT):
                await in_flight.wait()
            # The client gives up on it and goes away (legacy: cancelled, then the session
            # deleted; 2026-07-28: the request's stream closed).
            tg.cancel_scope.cancel()
    assert not returned, returned

    async with http.client(token) as second:
        s = await ok(second, "status", id=pid_id)
        assert s["state"] == "running" and s["output"] == "", s
        # Through the gate (O_NONBLOCK: an error, not a hang, if the process were gone).
        fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)
        await ok(second, "wait", id=pid_id, until="^one$", timeout_ms=20_000)
        s = await ok(second, "status", id=pid_id)
        assert s["state"] in ("running", "waiting_input") and s["output"] == "one\n", s
        await ok(second, "send_input", id=pid_id, text="hello\n")
        w = await ok(second, "wait", id=pid_id, since=s["next"], until="two:", timeout_ms=20_000)
        assert w["wait"] == "matched" and "two:hello" in w["output"], w
        assert "one" not in w["output"], f"only output after the cursor: {w}"
        assert [(p["id"], p["owner"]) for p in await rows(second, state="running")] == [(pid_id, "flaky")]
        killed = await ok(second, "send_signal", id=pid_id, signal="KILL")
        assert killed["state"] == "killed", killed
    assert await wait_for(lambda: not world.marked(pid_id))


@limited()
async def test_a_run_that_yields_keeps_running(world: World, http: HttpServer) -> None:
    async with http.client(http.token("yielder")) as c:
        r = await ok(c, "run", command="sleep 30", yield_ms=300)
        assert r["state"] == "running", r
        running = await rows(c, state="running")
        assert [(p["id"], p["owner"], p["command"]) for p in running] == [(r["id"], "yielder", "sleep 30")]
        assert await wait_for(lambda: world.marked(r["id"])), "the process is not running"
        killed = await ok(c, "send_signal", id=r["id"], signal="KILL")
        assert killed["state"] == "killed", killed
    assert await wait_for(lambda: not world.marked(r["id"]))


@limited()
async def test_progress_during_a_long_run_then_cancelling_it_stops_it(world: World, http: HttpServer) -> None:
    command = "echo started; sleep 30"
    notes: list[tuple[float, str | None]] = []
    noted = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, message))
        noted.set()

    async with http.client(http.token("canceller")) as c:
        scope = anyio.CancelScope()

        async def blocked_run() -> None:
            with scope:
                await c.call_tool("run", {"command": command, "yield_ms": 60_000}, progress_callback=on_progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked_run)
            with anyio.fail_after(CALL_TIMEOUT):
                await noted.wait()
            # Running, and seen in the table, while its call is in flight.
            row = next(p for p in await rows(c, state="running") if p["command"] == command)
            assert row["owner"] == "canceller", row
            progress, message = notes[0]
            assert progress >= 4 and message and f"process {row['id']} running" in message, notes
            # Abandoning the call cancels it (legacy: notifications/cancelled; 2026-07-28:
            # its stream closed), and a cancelled synchronous run stops its process.
            scope.cancel()
        done = await ok(c, "wait", id=row["id"], timeout_ms=15_000)
        assert done["wait"] == "exited" and done["state"] == "killed", done
        assert done["output"] == "started\n", done
    assert await wait_for(lambda: not world.marked(row["id"]))


@pytest.fixture
def session_http() -> Iterator[tuple[World, HttpServer]]:
    """An endpoint for requests made by hand in the legacy era (2025-06-18 sessions)."""
    world = World("legacy")
    server = HttpServer(world)
    try:
        server.start()
        yield world, server
    finally:
        server.stop()
        world.cleanup()


def test_a_connection_cut_mid_run_is_no_cancel_in_a_session(session_http: tuple[World, HttpServer]) -> None:
    """MCP 2025-06-18: a disconnection is not a cancellation (only notifications/cancelled is):
    a synchronous `run` whose connection is cut, with no cancel sent, runs on."""
    world, http = session_http
    session = RawSession(http, http.token("cut"))
    command = "echo started; sleep 30"
    conn = session.begin_call("run", command=command, yield_ms=60_000)
    try:
        # Its reply cannot announce it while the call is in flight: the table does.
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            listed = session.call("list_processes", state="running")["structuredContent"]["processes"]
            found = [p for p in listed if p["command"] == command]
            if found:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.02)
        pid_id = found[0]["id"]
        session.call("wait", id=pid_id, until="started", timeout_ms=20_000)
    finally:
        conn.close()
    # The absence of a stop, over a window far longer than a cancel takes to stop a process
    # (milliseconds; at 2026-07-28, where closing the stream is the cancel).
    w = session.call("wait", id=pid_id, until="never-printed", timeout_ms=2_000)["structuredContent"]
    assert w["wait"] == "timeout" and w["state"] == "running", w
    assert world.marked(pid_id), "the process is gone"
    killed = session.call("send_signal", id=pid_id, signal="KILL")["structuredContent"]
    assert killed["state"] == "killed", killed
    deadline = time.monotonic() + CALL_TIMEOUT
    while world.marked(pid_id):
        assert time.monotonic() < deadline, world.marked(pid_id)
        time.sleep(0.01)


@limited()
async def test_an_approval_is_asked_of_the_session_whose_token_started_it(world: World) -> None:
    """An `ask` rule of the daemon (here from the endpoint's environment, which starts it) holds
    a command a token runs; the question goes to that token's client by elicitation, in both
    eras, and its answer lets the command run, owned by the token."""
    from test_approvals import ASK, Person, accept, check_form

    server = HttpServer(world)
    server.env = server.env | {"CUBA_EXEC_ASK_COMMANDS": ASK}
    try:
        server.start()
        token = server.token("tablet")
        marker = world.dir / "approved"
        person = Person(accept("approve_once"))
        async with server.client(token, elicitation_callback=person) as c:
            command = f"touch {marker} && echo made"
            r = await call(c, "run", command=command)
            assert not r.is_error, text(r)
            assert sc(r)["exit_code"] == 0 and sc(r)["output"] == "made\n", text(r)
            assert len(person.forms) == 1, person.messages()
            check_form(person.forms[0], f"it wants to run `{command}`")
            assert marker.exists()
            listed = text(await call(c, "list_processes"))
            assert "owner:tablet" in listed, listed
    finally:
        server.stop()
