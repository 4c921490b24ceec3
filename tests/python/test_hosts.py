"""Hosts through MCP, end to end, in both protocol generations: the real `cuba-exec` binary
reaching a second daemon through a real `sshd` and `cubactl bridge`, as it reaches another
machine.

The "remote" daemon is a second private daemon on this machine, with a socket, state dir and
environment of its own: `ssh box` sets them (`SetEnv`), and the bridge starts that daemon on
first use, so what reaches it goes through `ssh` and `cubactl bridge` exactly as to another
machine. Host `down` is ssh to a closed port.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from conftest import World, bin_dir
from sshd import SshServer
from test_mcp import call, limited, ok, rows, sc, text, wait_for

pytestmark = pytest.mark.anyio

# A variable only the remote daemon's environment has.
REMOTE_MARK = ("CUBA_TEST_REMOTE_MARK", "/remote-side")
# A secret of the remote environment: its value must never reach the model.
REMOTE_SECRET = ("CUBA_TEST_REMOTE_TOKEN", "remote-secret-4242")
# A variable only the shim's (the laptop's) environment has.
LAPTOP_MARK = ("CUBA_TEST_LAPTOP", "laptop-only")


def _toml(value: str | list[str]) -> str:
    """A TOML value: a JSON string of these plain ASCII paths is a TOML basic string."""
    if isinstance(value, list):
        return "[" + ", ".join(map(json.dumps, value)) + "]"
    return json.dumps(value)


@dataclass
class Hosts:
    """This machine's world (`local`), the remote daemon's (`remote`), the sshd between them
    and `work`, host box's `cwd` there."""

    local: World
    remote: World
    sshd: SshServer
    work: Path

    def cleanup(self) -> None:
        # The shim and this machine's daemon first, so nothing dials box while it goes away;
        # then sshd and what its sessions run (the remote daemon among them); then whatever of
        # the remote daemon's is left by its marker.
        self.local.cleanup()
        self.sshd.cleanup()
        self.remote.cleanup()


@pytest.fixture
def hosts(world: World) -> Iterator[Hosts]:
    """`box`: the remote daemon over ssh, with a `cwd`; `down`: ssh to a closed port; both in
    the config file the shim (and its daemon) read through CUBA_EXEC_CONFIG."""
    remote = World(world.mode)
    sshd: SshServer | None = None
    try:
        sshd = SshServer()
        sshd.add_host(
            "box",
            {
                "CUBA_EXEC_SOCKET": str(remote.socket),
                "CUBA_EXEC_STATE_DIR": str(remote.state),
                "CUBA_EXEC_SHUTDOWN_TIMEOUT": "500ms",
                "CUBA_EXEC_LOG": "warn",
                REMOTE_MARK[0]: REMOTE_MARK[1],
                REMOTE_SECRET[0]: REMOTE_SECRET[1],
            },
        )
        sshd.add_unreachable_host("down")
        work = remote.dir / "work"
        work.mkdir()
        cubactl = bin_dir() / "cubactl"
        assert cubactl.is_file(), f"{cubactl} not found: run `cargo build --workspace --bins` first"
        common = f"ssh_options = {_toml(['-F', str(sshd.config)])}\nremote_bin = {_toml(str(cubactl))}\n"
        config = world.dir / "config.toml"
        config.write_text(
            f'[hosts.box]\nssh = "box"\n{common}cwd = {_toml(str(work))}\n'
            f'\n[hosts.down]\nssh = "down"\n{common}'
        )
        world.env["CUBA_EXEC_CONFIG"] = str(config)
        h = Hosts(world, remote, sshd, work)
    except BaseException:
        if sshd is not None:
            sshd.cleanup()
        remote.cleanup()
        raise
    try:
        yield h
    finally:
        h.cleanup()


def cubactl_version() -> str:
    """The version the built binaries report (`cubactl 0.1.0` → `0.1.0`)."""
    out = subprocess.run(
        [str(bin_dir() / "cubactl"), "--version"], capture_output=True, text=True, check=True, timeout=20
    )
    return out.stdout.split()[-1]


@limited()
async def test_a_remote_command_runs_in_the_remote_environment_and_cwd(world: World, hosts: Hosts) -> None:
    """The remote side's own cwd and environment, not the shim's, and its secrets hidden."""
    command = (
        f"pwd; echo mark=${REMOTE_MARK[0]}; echo laptop=${{{LAPTOP_MARK[0]}:-unset}}; "
        f"echo token=${REMOTE_SECRET[0]}"
    )
    async with world.client(**{LAPTOP_MARK[0]: LAPTOP_MARK[1]}) as c:
        r = await call(c, "run", command=command, host="box")
        assert not r.is_error, text(r)
        header = text(r).splitlines()[0]
        assert header.startswith("[id:") and " host:box" in header, header
        assert sc(r)["host"] == "box" and sc(r)["exit_code"] == 0, sc(r)
        assert sc(r)["output"].splitlines() == [
            os.path.realpath(hosts.work),
            f"mark={REMOTE_MARK[1]}",
            "laptop=unset",
            "token=[REDACTED]",
        ], sc(r)["output"]
        assert REMOTE_SECRET[1] not in text(r)

        # The same command here sees the shim's environment: the difference is the host's.
        here = await ok(c, "run", command=command)
        assert "host" not in here, here
        lines = here["output"].splitlines()
        assert lines[1:3] == ["mark=", f"laptop={LAPTOP_MARK[1]}"], lines

        # A relative cwd starts at the host's directory.
        (hosts.work / "sub").mkdir()
        sub = await ok(c, "run", command="pwd", cwd="sub", host="box")
        assert sub["output"] == os.path.realpath(hosts.work / "sub") + "\n", sub


@limited()
async def test_start_input_wait_status_list_and_kill_on_a_remote_host(world: World, hosts: Hosts) -> None:
    """Every process tool reaches the remote daemon's table, and its process really stops."""
    async with world.client() as c:
        started = await ok(c, "start", command="echo ready; read x; echo got-$x; exec sleep 300", host="box")
        pid_id = started["id"]
        assert started["host"] == "box", started
        assert f'(host="box", id={pid_id}' in started["hint"], started["hint"]
        # The process is the remote daemon's: it carries that daemon's marker, not ours.
        assert await wait_for(lambda: bool(hosts.remote.marked(pid_id))), hosts.sshd.log()
        assert started["pid"] in hosts.remote.marked(pid_id) and not world.marked(pid_id)

        w = await ok(c, "wait", id=pid_id, until="ready", host="box", timeout_ms=15_000)
        assert w["wait"] == "matched" and w["host"] == "box", w
        await ok(c, "send_input", id=pid_id, text="yes\n", host="box")
        w = await ok(c, "wait", id=pid_id, since=w["next"], until="got-", host="box", timeout_ms=15_000)
        assert w["wait"] == "matched" and "got-yes" in w["output"], w
        s = await ok(c, "status", id=pid_id, host="box")
        assert s["state"] == "running" and s["output"] == "ready\ngot-yes\n", s

        listed = [r for r in await rows(c, host="box") if r["id"] == pid_id]
        assert [(r["host"], r["state"]) for r in listed] == [("box", "running")], listed
        # The remote daemon knows the client as the agent on this machine.
        assert listed[0]["owner"] == f"pytest-agent@{socket.gethostname()}", listed
        # Ids are per host: this machine's table does not have it.
        assert not await rows(c)
        here = await call(c, "status", id=pid_id)
        assert here.is_error and "got-yes" not in text(here), text(here)

        r = await call(c, "send_signal", id=pid_id, host="box")
        assert not r.is_error, text(r)
        assert sc(r)["state"] == "killed" and sc(r)["host"] == "box", sc(r)
        assert await wait_for(lambda: not hosts.remote.marked(pid_id)), hosts.remote.marked(pid_id)


@limited()
async def test_list_hosts_reports_a_dead_host_quickly_and_the_good_ones_unaffected(
    world: World, hosts: Hosts
) -> None:
    """A refused connection is one host's error, told in ssh's own words, not a slow failure."""
    version = cubactl_version()
    async with world.client() as c:
        began = time.monotonic()
        listed = await ok(c, "list_hosts")
        took = time.monotonic() - began
        assert took < 10, f"list_hosts took {took:.1f} s"
        by_name = {h["host"]: h for h in listed["hosts"]}
        assert [h["host"] for h in listed["hosts"]] == ["local", "box", "down"], listed
        local, box, down = by_name["local"], by_name["box"], by_name["down"]
        for h in (local, box):
            assert h["reachable"] is True and "error" not in h, h
            assert h["version"] == version, h
            assert h["os"].startswith("linux/"), h
        # One machine under both names: the same system.
        assert box["os"] == local["os"] and box["shell"] == local["shell"], (local, box)
        assert box["via"] == "ssh box", box
        assert down["reachable"] is False, down
        assert "Connection refused" in down["error"], down


@limited()
async def test_list_processes_of_every_host(world: World, hosts: Hosts) -> None:
    """`host="*"` merges every reachable host's table and names the unreachable ones."""
    async with world.client() as c:
        remote_id = (await ok(c, "start", command="exec sleep 300", host="box"))["id"]
        local_id = (await ok(c, "start", command="exec sleep 301"))["id"]
        r = await call(c, "list_processes", host="*")
        assert not r.is_error, text(r)
        table = sc(r)["processes"]
        assert any(p["host"] == "box" and p["id"] == remote_id for p in table), table
        assert any(p["host"] == "local" and p["id"] == local_id for p in table), table
        assert {p["host"] for p in table} == {"local", "box"}, table
        unreachable = sc(r)["unreachable"]
        assert [u["host"] for u in unreachable] == ["down"], unreachable
        assert "Connection refused" in unreachable[0]["error"], unreachable
        assert "[host:down unreachable: " in text(r), text(r)
        await ok(c, "send_signal", id=remote_id, signal="SIGKILL", host="box")
        await ok(c, "send_signal", id=local_id, signal="SIGKILL")


@limited()
async def test_an_unknown_host_is_an_error_naming_the_known_ones(world: World, hosts: Hosts) -> None:
    """A typo in `host` fails the call (before any process starts), and the shim goes on."""
    async with world.client() as c:
        for tool, args in [
            ("run", {"command": "echo never"}),
            ("start", {"command": "echo never"}),
            ("status", {"id": 1}),
            ("list_processes", {}),
        ]:
            r = await call(c, tool, host="nowhere", **args)
            assert r.is_error and sc(r)["code"] == "BAD_REQUEST", (tool, text(r))
            assert 'unknown host "nowhere"' in text(r) and "configured: box, down" in text(r), (tool, text(r))
        assert not await rows(c) and not await rows(c, host="box"), "nothing started anywhere"
        assert (await ok(c, "run", command="echo fine", host="box"))["output"] == "fine\n"
