"""The real `cuba-exec` binary through the official Python MCP SDK, in both protocol generations.

Every test runs twice (the `world` fixture is parametrized over `mode`): once with the legacy
initialize handshake and once with 2026-07-28 per-request metadata. Each gets its own shim
and a private auto-started `cubad` (see conftest.py).
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from typing import Any

import anyio
import pytest
from conftest import CALL_TIMEOUT, World, bin_dir
from mcp import Client
from mcp_types import CallToolResult

pytestmark = pytest.mark.anyio

# No host is configured in these tests: list_hosts is not offered (test_hosts.py has hosts).
TOOLS = {"run", "start", "status", "wait", "send_input", "send_signal", "list_processes"}


def limited(seconds: float = 60.0):
    """Fails the test if its body takes longer than `seconds`."""

    def deco(fn):
        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            with anyio.fail_after(seconds):
                return await fn(*args, **kwargs)

        return wrapper

    return deco


def text(r: CallToolResult) -> str:
    return r.content[0].text  # type: ignore[union-attr]


def sc(r: CallToolResult) -> dict[str, Any]:
    assert r.structured_content is not None, text(r)
    return r.structured_content


async def call(c: Client, tool: str, **args: Any) -> CallToolResult:
    with anyio.fail_after(CALL_TIMEOUT):
        return await c.call_tool(tool, args)


async def ok(c: Client, tool: str, **args: Any) -> dict[str, Any]:
    r = await call(c, tool, **args)
    assert not r.is_error, text(r)
    return sc(r)


async def rows(c: Client, **filters: Any) -> list[dict[str, Any]]:
    return (await ok(c, "list_processes", **filters))["processes"]


async def find_running(c: Client, command: str) -> dict[str, Any]:
    """Polls the table until a running process runs `command` (its request is still in flight,
    so no reply can announce it)."""
    while True:
        for row in await rows(c, state="running"):
            if row["command"] == command:
                return row
        await anyio.sleep(0.02)


async def wait_for(cond, seconds: float = 20.0) -> bool:
    """For conditions no event announces (a pid vanishing)."""
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.01)
    return True


@limited()
async def test_tools_list_has_seven_tools_with_schemas(world: World) -> None:
    async with world.client() as c:
        tools = (await c.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        for t in tools:
            assert t.output_schema and t.output_schema["type"] == "object", t.name
            assert t.annotations is not None, t.name
            read_only = t.name in {"status", "wait", "list_processes", "list_hosts"}
            assert bool(t.annotations.read_only_hint) == read_only, t.name
        if world.mode == "legacy":
            assert c.server_info is not None and c.server_info.name == "cuba-exec"
        # Every turn of every conversation pays for this list (DESIGN §10: at most 8 KB).
        listed = await c.list_tools()
        size = len(listed.model_dump_json(by_alias=True, exclude_none=True).encode())
        assert size <= 8192, f"tools/list is {size} bytes"


@limited()
async def test_run_reports_exit_output_and_errors(world: World) -> None:
    async with world.client(MY_API_TOKEN="supersecret123") as c:
        r = await call(c, "run", command="echo hi")
        assert not r.is_error
        assert text(r).splitlines()[0] == f"[id:{sc(r)['id']} exit:0]"
        assert sc(r)["exit_code"] == 0 and sc(r)["output"] == "hi\n"

        r = await call(c, "run", command="exit 3")
        assert r.is_error and sc(r)["code"] == "EXIT" and sc(r)["exit_code"] == 3
        r = await call(c, "run", command="exit 127")
        assert r.is_error and sc(r)["code"] == "ENOENT"
        r = await call(c, "run", command="sleep 30", timeout_ms=300)
        assert r.is_error and sc(r)["code"] == "TIMEOUT" and sc(r)["state"] == "timed_out"

        r = await call(c, "run", command="echo token=$MY_API_TOKEN")
        assert sc(r)["output"] == "token=[REDACTED]\n"
        assert "supersecret123" not in text(r)


@limited()
async def test_run_auto_yields_and_wait_collects_the_rest(world: World) -> None:
    async with world.client() as c:
        first = await ok(c, "run", command="echo early; sleep 2; echo done", yield_ms=200)
        assert first["state"] == "running" and len(first["output"]) == first["next"]
        assert f"wait(id={first['id']}, since={first['next']})" in first["hint"]
        rest = await ok(c, "wait", id=first["id"], since=first["next"], timeout_ms=15_000)
        assert rest["wait"] == "exited" and rest["state"] == "exited"
        assert first["output"] + rest["output"] == "early\ndone\n"


@limited()
async def test_status_since_reads_only_new_bytes(world: World) -> None:
    async with world.client() as c:
        # Longer than `start`'s look at a command that printed at once (its grace and settle).
        pid_id = (await ok(c, "start", command="for i in 1 2 3 4 5 6 7 8 9 10; do echo l$i; sleep 0.2; done"))["id"]
        seen, cursor, reads = "", 0, 0
        while True:
            s = await ok(c, "status", id=pid_id, since=cursor)
            assert len(s["output"]) == s["next"] - cursor
            reads += bool(s["output"])
            seen += s["output"]
            cursor = s["next"]
            if s["state"] != "running":
                break
            # Block until more output instead of sleeping.
            await ok(c, "wait", id=pid_id, since=cursor, until="l", timeout_ms=10_000)
        assert seen == "".join(f"l{i}\n" for i in range(1, 11))
        assert reads >= 3, reads


@limited()
async def test_wait_until_pattern_returns_before_the_end(world: World) -> None:
    async with world.client() as c:
        pid_id = (await ok(c, "start", command="echo boot; sleep 0.3; echo 'ready on 8080'; exec sleep 30"))["id"]
        w = await ok(c, "wait", id=pid_id, until=r"ready on \d+", timeout_ms=10_000)
        assert w["wait"] == "matched" and w["matched"] == "ready on 8080"
        assert w["state"] == "running"
        # Found once its `exec sleep` is through: a process in the middle of an exec shows no
        # environment for a moment.
        assert await wait_for(lambda: world.marked(pid_id)), "wait never stops the process"
        await ok(c, "send_signal", id=pid_id, signal="SIGKILL")


@limited()
async def test_send_input_and_send_signal(world: World) -> None:
    async with world.client() as c:
        cat = (await ok(c, "start", command="cat"))["id"]
        await ok(c, "send_input", id=cat, text="hello\n")
        w = await ok(c, "wait", id=cat, until="^hello$", timeout_ms=10_000)
        assert w["wait"] == "matched"
        await ok(c, "send_input", id=cat, eof=True)
        done = await ok(c, "wait", id=cat, timeout_ms=10_000)
        assert done["state"] == "exited" and done["output"] == "hello\n"

        sleeper = (await ok(c, "start", command="exec sleep 30"))["id"]
        r = await call(c, "send_signal", id=sleeper, signal="SIGTERM")
        assert not r.is_error, text(r)
        assert sc(r)["state"] == "killed"
        assert await wait_for(lambda: not world.marked(sleeper))


@limited()
async def test_bad_argument_then_a_good_call(world: World) -> None:
    async with world.client() as c:
        r = await call(c, "run")
        assert r.is_error and "missing field `command`" in text(r)
        r = await call(c, "run", command="true", yeild_ms=1)
        assert r.is_error and "unknown field `yeild_ms`" in text(r)
        r = await call(c, "status", id=424242)
        assert r.is_error and sc(r)["code"] == "NOT_FOUND"
        r = await call(c, "run", command="echo a\0b")
        assert r.is_error and sc(r)["code"] == "BAD_REQUEST"
        good = await ok(c, "run", command="echo fine")
        assert good["output"] == "fine\n"


@limited()
async def test_two_clients_share_one_table(world: World) -> None:
    async with world.client("agent-one") as one, world.client("agent-two") as two:
        a = await ok(one, "start", command="exec sleep 30", name="svc")
        b = await ok(two, "start", command="exec sleep 31")
        for c in (one, two):
            owners = {r["id"]: r["owner"] for r in await rows(c)}
            assert owners == {a["id"]: "agent-one", b["id"]: "agent-two"}
        only = await rows(two, owner="agent-one")
        assert [r["id"] for r in only] == [a["id"]] and only[0]["name"] == "svc"
        assert await wait_for(lambda: len(world.daemons()) == 1), world.daemons()
        await ok(two, "send_signal", id=a["id"], signal="SIGKILL")
        await ok(one, "send_signal", id=b["id"], signal="SIGKILL")


@limited()
async def test_cancelling_a_sync_run_stops_the_process(world: World) -> None:
    # Both sleeps are forked before `started` is written, so the tree is whole when it matches.
    command = "sleep 30 & sleep 31 & echo started; wait"
    async with world.client() as c:
        scope = anyio.CancelScope()

        async def blocked_run() -> None:
            with scope:
                await c.call_tool("run", {"command": command, "yield_ms": 60_000})

        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked_run)
            row = await find_running(c, command)
            await ok(c, "wait", id=row["id"], until="started", timeout_ms=10_000)
            # A sleep in the middle of its exec has no environment to read for a moment.
            assert await wait_for(lambda: len(world.marked(row["id"])) >= 3), world.marked(row["id"])
            # Abandoning the call sends notifications/cancelled for it.
            scope.cancel()
        done = await ok(c, "wait", id=row["id"], timeout_ms=15_000)
        assert done["wait"] == "exited" and done["state"] == "killed"
        assert await wait_for(lambda: not world.marked(row["id"]))
        assert (await ok(c, "run", command="echo after"))["output"] == "after\n"


@limited()
async def test_progress_notifications_during_a_long_run(world: World) -> None:
    notes: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, message))

    async with world.client() as c:
        started = time.monotonic()
        r = await c.call_tool(
            "run", {"command": "echo tick; sleep 6; echo done"}, progress_callback=on_progress
        )
        assert time.monotonic() - started >= 6
        assert sc(r)["output"] == "tick\ndone\n"
        assert notes, "no progress notification during a 6 s run"
        progress, message = notes[0]
        assert progress >= 4
        assert message and f"process {sc(r)['id']}" in message


@limited()
async def test_process_output_is_a_resource(world: World) -> None:
    async with world.client() as c:
        r = await ok(c, "run", command="echo res-text")
        uri = f"cuba://process/{r['id']}/output"
        listed = await c.list_resources(cache_mode="bypass")
        assert uri in {str(x.uri) for x in listed.resources}
        read = await c.read_resource(uri, cache_mode="bypass")
        assert read.contents[0].text == "res-text\n"  # type: ignore[union-attr]


@limited()
async def test_matched_line_is_redacted(world: World) -> None:
    async with world.client(MY_API_TOKEN="supersecret123") as c:
        pid_id = (await ok(c, "start", command="echo key=supersecret123; exec sleep 30"))["id"]
        w = await ok(c, "wait", id=pid_id, until="key=", timeout_ms=10_000)
        await ok(c, "send_signal", id=pid_id, signal="SIGKILL")
        assert w["output"] == "key=[REDACTED]\n"
        assert "supersecret123" not in w["matched"]


def exec_checks(world: World) -> str:
    """The daemon's `exec checks` line (`cubactl daemon status`), once a call started it."""
    out = subprocess.run(
        [str(bin_dir() / "cubactl"), "daemon", "status"],
        env=world.env | {"NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
    )
    return next((l for l in out.stdout.splitlines() if l.startswith("exec checks")), out.stdout)


@limited()
async def test_a_program_refused_at_its_exec_is_named_in_the_reply(world: World) -> None:
    marker = world.dir / "keep"
    marker.write_text("x")
    async with world.client() as c:
        await ok(c, "run", command="true")
        line = exec_checks(world)
        if "exec checks on" not in line:
            why = f"this machine cannot check execs: {line}"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
        # A name only the shell knows, at run time: no parser sees `rm`; its exec is refused.
        r = await call(c, "run", command=f"x=$(printf rm); $x {marker}; echo after")
        assert marker.exists(), text(r)
        assert "after" in sc(r)["output"], text(r)
        assert "BLOCKED: /usr/bin/rm (`rm " in text(r) and "rule blocklist" in text(r), text(r)
        blocked = sc(r)["blocked"]
        assert len(blocked) == 1 and blocked[0].startswith("BLOCKED: /usr/bin/rm (`rm "), blocked
        assert "at its exec, rule blocklist" in blocked[0], blocked


@limited()
async def test_a_listened_process_resource_is_announced_when_it_changes() -> None:
    """`subscriptions/listen` (2026-07-28) for a process's resource: the daemon's event log
    pushes `notifications/resources/updated` for it (here: it waits for input, or ends)."""
    from mcp.shared.subscriptions import ResourceUpdated

    world = World("2026-07-28")
    try:
        async with world.client() as c:
            started = await ok(c, "start", command="read line; echo got $line")
            uri = f"cuba://process/{started['id']}/output"
            async with c.listen(resource_subscriptions=[uri]) as sub:
                await ok(c, "send_input", id=started["id"], text="x\n")
                with anyio.fail_after(CALL_TIMEOUT):
                    event = await anext(aiter(sub))
                assert isinstance(event, ResourceUpdated) and event.uri == uri, event
            done = await ok(c, "wait", id=started["id"], timeout_ms=10_000)
            assert done["output"] == "got x\n", done
    finally:
        world.cleanup()
