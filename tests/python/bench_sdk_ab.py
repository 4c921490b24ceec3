"""Two builds side by side through the official Python MCP SDK: `run "echo hi"` through each
build's MCP server and daemon, interleaved in one loop with a direct `sh -c` and each client's
ping, so that both builds see the same machine and the same client. Prints, per build, the
medians and "ours" (run - floor - ping), the figure the issue's goal is stated in.

Run (each directory holds a `cubad` and a `cuba-exec`, e.g. two `target/release` copies):
    .venv/bin/python tests/python/bench_sdk_ab.py DIR_A DIR_B [--calls 400]

A benchmark, not a test: it prints figures and fails nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conftest  # noqa: E402


def world(bindir: str) -> conftest.World:
    os.environ["CUBA_EXEC_BIN_DIR"] = str(Path(bindir).resolve())
    return conftest.World("legacy")


async def main(args: argparse.Namespace) -> None:
    worlds = [world(args.a), world(args.b)]
    floor: list[float] = []
    ping: list[list[float]] = [[], []]
    run: list[list[float]] = [[], []]
    try:
        async with worlds[0].client() as a, worlds[1].client() as b:
            clients = [a, b]
            for c in clients:
                await c.list_tools()
                for _ in range(20):
                    await c.call_tool("run", {"command": "echo hi"})
            for i in range(args.calls):
                t = time.perf_counter()
                subprocess.run(["/bin/sh", "-c", "echo hi"], stdout=subprocess.DEVNULL, check=True)
                floor.append(time.perf_counter() - t)
                # Alternate which build goes first, so neither always follows the subprocess.
                for k in (i % 2, 1 - i % 2):
                    c = clients[k]
                    t = time.perf_counter()
                    await c.send_ping()
                    ping[k].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    await c.call_tool("run", {"command": "echo hi"})
                    run[k].append(time.perf_counter() - t)
    finally:
        for w in worlds:
            w.cleanup()
    f = statistics.median(floor) * 1000
    for k, name in enumerate("AB"):
        p = statistics.median(ping[k]) * 1000
        r = statistics.median(run[k]) * 1000
        print(f"{name}: run {r:.3f} ms  ping {p:.3f} ms  ours {r - f - p:.3f} ms")
    print(f"floor (sh -c) {f:.3f} ms")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--calls", type=int, default=400)
    anyio.run(main, p.parse_args())
