"""Terminals and sessions of the real `cuba-exec` binary through the official Python MCP SDK, in
both protocol generations (see conftest.py): a Python REPL on a tty answered with keys and read
as a screen, and a persistent session keeping `cd` and `export` across calls.
"""

from __future__ import annotations

import pytest
from conftest import World
from test_mcp import call, limited, ok, rows, sc, text

pytestmark = pytest.mark.anyio


@limited()
async def test_python_repl_on_a_tty(world: World) -> None:
    async with world.client() as c:
        started = await ok(c, "start", command="python3 -q", tty=True)
        pid_id = started["id"]
        assert started["tty"] == {"cols": 120, "rows": 40}

        w = await ok(c, "wait", id=pid_id, timeout_ms=15_000)
        assert w["wait"] == "waiting_input", w
        assert w["output"].endswith(">>> "), w["output"]
        assert 'keys=["Enter"]' in w["hint"], w["hint"]

        await ok(c, "send_input", id=pid_id, text="print(6*7)", keys=["Enter"])
        w = await ok(c, "wait", id=pid_id, since=w["next"], timeout_ms=15_000)
        assert w["wait"] == "waiting_input", w
        assert "\n42\n" in w["output"] and "\r" not in w["output"], w["output"]

        s = await ok(c, "status", id=pid_id, view="screen")
        lines = s["screen"]["lines"]
        assert lines[:3] == [">>> print(6*7)", "42", ">>>"], lines
        assert s["screen"]["cursor"] == [2, 4], s["screen"]

        await ok(c, "send_input", id=pid_id, keys=["C-d"])
        done = await ok(c, "wait", id=pid_id, since=w["next"], timeout_ms=15_000)
        assert done["wait"] == "exited" and done["exit_code"] == 0, done


@limited()
async def test_screen_of_a_pipe_process_is_refused(world: World) -> None:
    async with world.client() as c:
        pid_id = (await ok(c, "run", command="echo plain"))["id"]
        r = await call(c, "status", id=pid_id, view="screen")
        assert r.is_error and sc(r)["code"] == "BAD_REQUEST" and "tty: true" in text(r), text(r)
        r = await call(c, "run", command="true", cols=80)
        assert r.is_error and sc(r)["code"] == "BAD_REQUEST", text(r)


@limited()
async def test_session_keeps_cd_and_export_across_calls(world: World) -> None:
    async with world.client() as c:
        first = await ok(c, "run", command="cd /tmp", session="dev")
        assert first["exit_code"] == 0 and first["kind"] == "in_session" and first["session"] == "dev"
        assert "session dev" in first["notice"], first
        await ok(c, "run", command="export FOO=bar", session="dev")
        r = await call(c, "run", command="echo $FOO; pwd; false", session="dev")
        assert r.is_error, text(r)
        assert sc(r)["exit_code"] == 1 and sc(r)["output"] == "bar\n/tmp\n", sc(r)
        shells = [row for row in await rows(c) if row.get("kind") == "session"]
        assert [(s["session"], s["state"]) for s in shells] == [("dev", "running")], shells
