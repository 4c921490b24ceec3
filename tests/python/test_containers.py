"""Container hosts through MCP with the official Python SDK, in both protocol generations:
the real `cuba-exec` binary reaching a `cubad` it put into real podman containers made from
the test image (`scripts/container-image`), one command on a group of them folded into one
reply, and a container stopped under a `wait`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import anyio
import pytest
from conftest import World
from test_mcp import call, limited, ok, sc, text

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/cuba-exec-test:bookworm"


def containers_conf() -> str:
    """The image built (once) and the containers.conf podman needs here; a skip where podman,
    runc or mmdebstrap is missing (a failure under CI, which installs them)."""
    missing = [t for t in ("podman", "runc", "mmdebstrap") if shutil.which(t) is None]
    if missing:
        why = f"container hosts need {', '.join(missing)} (apt-get install podman runc mmdebstrap)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    out = subprocess.run([str(REPO / "scripts" / "container-image")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


class Boxes:
    """Image hosts `cx1`, `cx2`, their containers named after this test; `remove` drops them."""

    def __init__(self, world: World) -> None:
        self.conf = containers_conf()
        self.names = {h: f"cx-py-{os.getpid()}-{id(self)}-{h}" for h in ("cx1", "cx2")}
        config = world.dir / "config.toml"
        config.write_text(
            "".join(f'[hosts.{h}]\nimage = "{IMAGE}"\nengine = "podman"\ncontainer = "{c}"\n\n' for h, c in self.names.items())
        )
        world.env.update(CUBA_EXEC_CONFIG=str(config), CONTAINERS_CONF=self.conf)

    def podman(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["podman", *args], env=os.environ | {"CONTAINERS_CONF": self.conf}, capture_output=True, text=True, timeout=120)

    def remove(self) -> None:
        for c in self.names.values():
            self.podman("rm", "-f", "-t", "0", c)


@pytest.fixture
def boxes(world: World) -> Iterator[Boxes]:
    b = Boxes(world)
    try:
        yield b
    finally:
        world.cleanup()
        b.remove()


@limited(180)
async def test_a_group_of_containers_runs_one_command_and_folds_its_output(world: World, boxes: Boxes) -> None:
    async with world.client() as c:
        r = await call(c, "run", command="cat /etc/debian_version; test -x /opt/cuba-exec/bin/cubad && echo copied", host="cx*")
        assert not r.is_error, text(r)
        lines = text(r).splitlines()
        assert lines[0].startswith("[hosts:2 ok:2 failed:0 "), text(r)
        # One output, printed by both: shown once, after the hosts that printed it.
        assert lines[1].startswith("--- cx1#1 cx2#1 (2 hosts) [exit:0]"), text(r)
        assert lines[3] == "copied", text(r)
        assert [(h["host"], h["exit_code"]) for h in sc(r)["hosts"]] == [("cx1", 0), ("cx2", 0)], sc(r)

        # A failure is named first, before any output.
        r = await call(c, "run", command="test -e /never", host=["cx1", "cx2"])
        assert r.is_error, text(r)
        assert text(r).splitlines()[1] == "hosts cx1 cx2: exit:1", text(r)

        listed = await ok(c, "list_hosts")
        by_name = {h["host"]: h for h in listed["hosts"]}
        for h in ("cx1", "cx2"):
            assert by_name[h]["reachable"] is True and by_name[h]["os"].startswith("linux/"), listed
            assert isinstance(by_name[h]["latency_ms"], int), listed


@limited(180)
async def test_a_container_stopped_under_a_wait_is_said_and_the_next_call_starts_it(world: World, boxes: Boxes) -> None:
    async with world.client() as c:
        started = await ok(c, "start", command="echo up; exec sleep 300", host="cx1")
        assert started["host"] == "cx1", started
        w = await ok(c, "wait", id=started["id"], until="up", host="cx1", timeout_ms=30_000)
        assert w["wait"] == "matched", w
        async with anyio.create_task_group() as tg:
            result: dict = {}

            async def waiting() -> None:
                result["r"] = await call(c, "wait", id=started["id"], host="cx1", since=w["next"], timeout_ms=60_000)

            tg.start_soon(waiting)
            stop = boxes.podman("stop", "-t", "0", boxes.names["cx1"])
            assert stop.returncode == 0, stop.stderr
        r = result["r"]
        assert r.is_error, text(r)
        assert "stopped" in text(r) and boxes.names["cx1"] in text(r), text(r)
        # The next call starts the container again; the process that ran in it is lost.
        again = await call(c, "status", id=started["id"], host="cx1")
        assert sc(again)["state"] == "lost" and sc(again)["host"] == "cx1", text(again)
