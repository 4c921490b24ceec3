"""Container hosts measured (docs/measurements.md, "Containers and host groups"):

1. Time to the first command in a fresh container host (cold: the container made from the test
   image, cubactl and cubad copied in, the daemon there started, the first reply), and again
   on a running container with a new client (warm): `cubactl --host H run -- echo hi`, and the
   same first `run` through MCP (the official Python SDK against `cuba-exec`).
2. `run "echo hi"` through a container host against this machine, over one MCP connection
   (the link kept): medians of many.
3. A fan-out of `uname -a` to N container hosts (`host="c*"`): wall time and reply size; and
   of `uname -srm`, whose outputs are identical and fold into one.

Needs podman, runc, mmdebstrap (scripts/container-image builds the image) and the release
binaries. Usage:
    .venv/bin/python tests/python/measure_hosts.py [--bin-dir target/release] [--hosts 20] [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp_types import Implementation

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/cuba-exec-test:bookworm"


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


class World:
    """A private socket and state for this machine's daemon, a config of container hosts
    (`c01`…), containers named after this process; `close` removes them all."""

    def __init__(self, bins: Path, hosts: int) -> None:
        self.conf = subprocess.run([str(REPO / "scripts" / "container-image")], check=True, capture_output=True, text=True).stdout.strip()
        self.dir = Path(tempfile.mkdtemp(prefix="cxh", dir="/tmp"))
        os.chmod(self.dir, 0o700)
        self.bins = bins
        self.prefix = f"cxm-{os.getpid()}"
        self.names = [f"c{i:02}" for i in range(1, hosts + 1)] + ["solo"]
        config = self.dir / "config.toml"
        config.write_text("".join(f'[hosts.{n}]\nimage = "{IMAGE}"\nengine = "podman"\ncontainer = "{self.prefix}-{n}"\n\n' for n in self.names))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CUBA_EXEC_")}
        self.env.update(CONTAINERS_CONF=self.conf, CUBA_EXEC_CONFIG=str(config), CUBA_EXEC_SOCKET=str(self.dir / "s"), CUBA_EXEC_STATE_DIR=str(self.dir / "state"), CUBA_EXEC_NOTIFY="off")

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bins / "cubactl"), *args], env=self.env, capture_output=True, text=True, timeout=120)

    def remove(self, name: str) -> None:
        subprocess.run(["podman", "rm", "-f", "-t", "0", f"{self.prefix}-{name}"], env=self.env, capture_output=True)

    def client(self) -> Client:
        params = StdioServerParameters(command=str(self.bins / "cuba-exec"), env=self.env)
        return Client(params, client_info=Implementation(name="measure-hosts", version="0"), read_timeout_seconds=300.0)

    def close(self) -> None:
        for n in self.names:
            self.remove(n)
        self.ctl("daemon", "stop", "--force")
        shutil.rmtree(self.dir, ignore_errors=True)


def timed_ctl(w: World, host: str) -> float:
    at = time.perf_counter()
    r = w.ctl("--host", host, "run", "--", "echo", "hi")
    took = (time.perf_counter() - at) * 1000
    if r.returncode != 0 or r.stdout.strip() != "hi":
        raise SystemExit(f"cubactl --host {host} run failed: {r.stdout}{r.stderr}")
    return took


async def first_mcp_run(w: World, host: str) -> float:
    async with w.client() as c:
        at = time.perf_counter()
        r = await c.call_tool("run", {"command": "echo hi", "host": host})
        took = (time.perf_counter() - at) * 1000
        if "hi" not in text_of(r):
            raise SystemExit(text_of(r))
        return took


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default=str(REPO / "target" / "release"))
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--cold", type=int, default=5, help="cold starts measured")
    a = ap.parse_args()
    w = World(Path(a.bin_dir).resolve(), a.hosts)
    try:
        print(f"podman {subprocess.run(['podman', '--version'], capture_output=True, text=True).stdout.split()[-1]}, {os.cpu_count()} cores")
        # 1. Cold and warm first commands.
        cold_ctl, cold_mcp, warm_ctl, warm_mcp = [], [], [], []
        for _ in range(a.cold):
            w.remove("solo")
            cold_ctl.append(timed_ctl(w, "solo"))
            warm_ctl.append(timed_ctl(w, "solo"))
            w.remove("solo")
            cold_mcp.append(await first_mcp_run(w, "solo"))
            warm_mcp.append(await first_mcp_run(w, "solo"))
        med = statistics.median
        print(f"first command, cold (container made, cubad copied, started): cubactl median {med(cold_ctl):.0f} ms, MCP median {med(cold_mcp):.0f} ms ({a.cold} runs)")
        print(f"first command, warm (container running, new client): cubactl median {med(warm_ctl):.0f} ms, MCP median {med(warm_mcp):.0f} ms ({a.cold} runs)")
        # 2. A kept link: container against this machine.
        async with w.client() as c:
            for host in ("solo", "local"):
                await c.call_tool("run", {"command": "echo warm", "host": host})
            took = {"solo": [], "local": []}
            for _ in range(a.runs):
                for host in ("solo", "local"):
                    at = time.perf_counter()
                    r = await c.call_tool("run", {"command": "echo hi", "host": host})
                    took[host].append((time.perf_counter() - at) * 1000)
                    assert "hi" in text_of(r), text_of(r)
            print(f'run "echo hi" over one MCP connection: container median {med(took["solo"]):.2f} ms, this machine median {med(took["local"]):.2f} ms ({a.runs} runs each)')
            # 3. Fan-out to every c* host: the first makes the containers.
            for round_ in ("cold", "warm", "warm", "warm"):
                at = time.perf_counter()
                r = await c.call_tool("run", {"command": "uname -a", "host": "c*"})
                wall = (time.perf_counter() - at) * 1000
                text = text_of(r)
                structured = len(json.dumps(r.structured_content or {}))
                head = text.splitlines()[0] if text else "?"
                print(f'fan-out `uname -a` to {a.hosts} container hosts ({round_}): {wall:.0f} ms wall, reply text {len(text.encode())} bytes, structured {structured} bytes; {head}')
            # The same question without the hostname, which differs in every container: the
            # outputs are identical and fold into one section.
            at = time.perf_counter()
            r = await c.call_tool("run", {"command": "uname -srm", "host": "c*"})
            wall = (time.perf_counter() - at) * 1000
            folded = text_of(r)
            print(f'fan-out `uname -srm` to {a.hosts} container hosts (warm): {wall:.0f} ms wall, reply text {len(folded.encode())} bytes, structured {len(json.dumps(r.structured_content or {}))} bytes')
            print("its reply:\n" + folded)
    finally:
        w.close()


if __name__ == "__main__":
    asyncio.run(main())
