"""Measures the Windows programs under Wine, in one run (the figures of README "Windows"):

1. `run "echo hi"` through the MCP server (`cuba-exec.exe`, the official Python SDK, round trip
   as the client sees it) against a direct `cmd /c echo hi` started by a Windows program;
2. 100 MB of output drained by the daemon (start to exit, all of it counted);
3. 100 processes started at once through the MCP server, then killed, and how many are left.

Usage: CUBA_EXEC_WINDOWS_BIN_DIR=target/windows/x86_64-pc-windows-gnu/debug \\
       .venv/bin/python tests/python/bench_windows.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp_types import Implementation  # noqa: E402
from test_windows import WINE, Win, start_wine, stop_wine  # noqa: E402

RUNS = 30
MB100 = 100 * 1024 * 1024
MANY = 100


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def mcp_part(w: Win) -> None:
    params = StdioServerParameters(command=str(WINE), args=[str(w.bin / "cuba-exec.exe")], env=w.env)
    client = Client(params, client_info=Implementation(name="bench-wine", version="0"),
                    read_timeout_seconds=120.0)
    async with client:
        await client.call_tool("run", {"command": "echo warm"})
        took = []
        for _ in range(RUNS):
            at = time.perf_counter()
            r = await client.call_tool("run", {"command": "echo hi"})
            took.append((time.perf_counter() - at) * 1000)
            assert "hi" in text_of(r), text_of(r)
        took.sort()
        print(f"run \"echo hi\" via MCP: median {statistics.median(took):.2f} ms, "
              f"fastest {took[0]:.2f} ms ({RUNS} runs)")

        at = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(MANY):
                tg.start_soon(client.call_tool, "start",
                              {"command": f'"{w.helper}" sleep', "name": f"many{i}"})
        print(f"{MANY} started at once via MCP: {(time.perf_counter() - at) * 1000:.0f} ms")


def main() -> None:
    w = Win()
    start_wine(w.bin)
    w.env["CUBA_EXEC_MAX_PROCS"] = str(MANY + 10)
    try:
        direct = w.run("cuba-test-helper.exe", "time", str(RUNS), "cmd", "/c", "echo hi",
                       check=True).stdout.strip()
        print(f"cmd /c echo hi, direct from a Windows program: {direct} ({RUNS} runs)")
        anyio.run(mcp_part, w)
        listed = json.loads(w.ctl("ps", "--json", check=True).stdout)
        rows = listed["processes"] if isinstance(listed, dict) else listed
        pids = [str(p["pid"]) for p in rows if (p.get("name") or "").startswith("many")]
        running = [p for p in rows if p["state"] == "running"]
        print(f"running before the kill: {len(running)} (pids {len(pids)})")
        at = time.perf_counter()
        w.ctl("kill", "--all", check=True)
        print(f"kill --all: {(time.perf_counter() - at) * 1000:.0f} ms (one cubactl call)")
        left = w.run("cuba-test-helper.exe", "alive", *pids).returncode == 0
        listed = json.loads(w.ctl("ps", "--json", check=True).stdout)
        rows = listed["processes"] if isinstance(listed, dict) else listed
        still = [p for p in rows if p["state"] == "running"]
        print(f"left running after the kill: {len(still)} in the table; any pid alive: {left}")

        at = time.perf_counter()
        w.ctl("start", "--name", "big", "--", w.helper, "out", str(MB100), check=True)
        w.ctl("wait", "big", "--timeout", "300s", check=True)
        took = time.perf_counter() - at
        info = json.loads(w.ctl("info", "big", "--json", check=True).stdout)
        print(f"100 MB drained: {took:.2f} s from start to exit ({MB100 / took / 1e6:.0f} MB/s "
              f"incl. two cubactl calls), stdout_bytes {info['stdout_bytes']}, "
              f"state {info['state']}")
    finally:
        w.close()
        stop_wine()


if __name__ == "__main__":
    main()
