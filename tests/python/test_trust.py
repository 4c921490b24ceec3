"""The trust boundary, attacked the way an agent would: from inside commands run through MCP
`run` (the official SDK, stdio, both protocol generations) and over HTTP with a narrowed token.
Each attack is a person's verb or a way past a check, and each must be refused with the rule
named while the daemon carries on as it was: a program the command wrote offered as the new
daemon (never run), a token minted or forged, an approval written into the file, a fake `sudo`
asking for a password, a copy of the dynamic loader running a blocked program.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio

import pytest
from conftest import World, bin_dir
from http_server import HttpServer, RawSession, message
from test_mcp import call, limited, text

pytestmark = pytest.mark.anyio


def cubactl(world: World) -> str:
    return f"'{bin_dir() / 'cubactl'}' --socket '{world.socket}'"


def daemon_pid(world: World) -> int:
    return int((world.dir / "s.lock").read_text().strip())


def attacks(world: World) -> tuple[str, Path, Path]:
    """A command that tries every person's verb, the marker a run of its fake daemon leaves, and
    the tokens file it tries to write a token into."""
    evil = world.dir / "evil-cubad"
    ran = world.dir / "evil-ran"
    tokens = world.dir / "tokens.toml"
    ctl = cubactl(world)
    command = (
        f"cp /bin/sh {evil}; printf '#!/bin/sh\\ntouch {ran}\\necho 7 8\\n' > {evil}; "
        f"{ctl} daemon upgrade --binary {evil} 2>&1; {ctl} daemon restart 2>&1; "
        f"{ctl} daemon stop --force 2>&1; {ctl} daemon reload 2>&1; "
        f"{ctl} token create mine 2>&1; "
        f"printf '[tokens.forged]\\nhash = \"{'0' * 64}\"\\ncreated = 1\\n' >> {tokens}; "
        f"{ctl} approvals forget --all 2>&1; echo done"
    )
    return command, ran, tokens


REFUSALS = [
    "only a person can upgrade or restart the daemon (rule person_only)",
    "only a person can stop the daemon",
    "only a person can reload",
    "only a person can make a token",
    "only a person can forget an approval",
]


def assert_refused(said: str, world: World, pid: int, ran: Path) -> None:
    for refusal in REFUSALS:
        assert refusal in said, f"{refusal!r} not in {said!r}"
    assert not ran.exists(), "the command's program ran as the daemon"
    assert daemon_pid(world) == pid, "the daemon was replaced"


@limited()
async def test_a_command_run_through_mcp_cannot_act_as_the_person(world: World) -> None:
    async with world.client("agent") as c:
        await call(c, "run", command="true")
        pid = daemon_pid(world)
        command, ran, tokens = attacks(world)
        r = await call(c, "run", command=command)
        said = text(r)
        assert "done" in said, said
        assert_refused(said, world, pid, ran)
        # The token it wrote into the file is no token; the daemon still serves this client.
        after = await call(c, "run", command=f"{cubactl(world)} token list --json")
        listed = text(after)
        assert '"name"' not in listed, listed
        assert "not in effect until `cubactl daemon reload`" in listed and "forged" in listed, listed
        assert "forged" in tokens.read_text()


@limited()
async def test_a_fake_sudo_or_a_copy_of_the_loader_gets_nothing(world: World) -> None:
    work = world.dir / "work"
    work.mkdir()
    marker = work / "marker"
    marker.write_text("keep")
    loader = next(l for l in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1") if os.path.exists(l))
    async with world.client("agent") as c:
        fake = await call(
            c,
            "run",
            command=f"cd {work} && cp /bin/sh ./sudo && ./sudo -c '\"$SUDO_ASKPASS\" \"[sudo] password for you:\"'; echo askpass=$?",
        )
        assert "askpass=1" in text(fake) and "not a genuine sudo" in text(fake), text(fake)
        copied = await call(c, "run", command=f"cd {work} && cp {loader} ./myld && ./myld /usr/bin/rm {marker}")
        assert copied.is_error and "BLOCKED" in text(copied) and "rm" in text(copied), text(copied)
    assert marker.exists(), "rm ran through a copy of the loader"
    approvals = json.loads(HttpServer(world).cubactl("approvals", "--json", env=world.env))
    assert approvals["pending"] == [], approvals




@limited()
async def test_a_narrowed_token_cannot_act_as_the_person_either(world: World, http: HttpServer) -> None:
    root = world.dir / "root"
    root.mkdir()
    # Narrowed to a directory; its commands may run cubactl and a shell, as an agent's would.
    token = http.token("narrow", "--roots", str(root))
    pid_before: Any = None
    async with http.client(token) as c:
        await call(c, "run", command="true")
        pid_before = daemon_pid(world)
        command, ran, _ = attacks(world)
        r = await call(c, "run", command=command)
        said = text(r)
        assert "done" in said, said
        assert_refused(said, world, pid_before, ran)
        # The token it tried to write for itself opens nothing.
        forged = await call(c, "run", command="echo still-me")
        assert "still-me" in text(forged)
    table = json.loads(http.cubactl("token", "list", "--json"))
    assert [t["name"] for t in table] == ["narrow"], table
    shutil.rmtree(root, ignore_errors=True)


@limited()
async def test_a_narrowed_token_cannot_read_or_stop_another_callers_task(world: World, http: HttpServer) -> None:
    """Tasks name daemon processes: another tenant's task id gets nothing of it — no state, no
    output, no stop, no subscription — while its owner reads it to the end."""
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    roots = []
    for name in ("a", "b"):
        root = world.dir / f"root-{name}"
        root.mkdir()
        roots.append(root)
    owner = RawSession(http, http.token("owner", "--roots", str(roots[0])), tasks)
    other = RawSession(http, http.token("other", "--roots", str(roots[1])), tasks)
    status, _, body = owner.rpc("tools/call", {"name": "run", "arguments": {"command": "sleep 2; echo secret-out", "yield_ms": 100}})
    assert status == 200, body
    handle = message(body)["result"]
    assert handle.get("resultType") == "task", handle
    task = handle["taskId"]
    pid = int(task.split("/")[1])

    # The other tenant: its tasks/get learns nothing, its cancel stops nothing.
    _, _, body = other.rpc("tasks/get", {"taskId": task})
    seen = message(body)
    assert "secret-out" not in json.dumps(seen), seen
    assert seen.get("result", {}).get("status") in (None, "failed"), seen
    _, _, body = other.rpc("tasks/cancel", {"taskId": task})
    assert "error" in message(body) or "secret" not in body, body
    _, _, body = other.rpc("resources/subscribe", {"uri": f"cuba://process/{pid}/output"})
    assert "error" in message(body), body
    # A command the other tenant runs cannot reach it either.
    said = other.call("run", command=f"{cubactl(world)} kill {pid} 2>&1; {cubactl(world)} events --id {pid} --json 2>&1; echo end")
    assert "secret-out" not in json.dumps(said) and "sleep 2" not in said["content"][0]["text"], said

    # The owner's task ran on, untouched, to its end.
    deadline = 40
    while deadline:
        _, _, body = owner.rpc("tasks/get", {"taskId": task})
        got = message(body)["result"]
        if got["status"] != "working":
            break
        deadline -= 1
        await anyio.sleep(got.get("pollIntervalMs", 1000) / 1000)
    assert got["status"] == "completed", got
    assert "secret-out" in got["result"]["content"][0]["text"], got
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
