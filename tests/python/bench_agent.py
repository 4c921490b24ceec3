"""What an agent pays, measured with the official Python MCP SDK against the real binaries:
tools/list bytes, list_processes bytes and time with 0/200/2000 finished records, and the
`run "echo hi"` latency beside a direct `sh -c 'echo hi'`, the client's ping round trip and a
tools/call the server answers at once, with the client's own CPU per call.

Run (after `cargo build --release --workspace --bins`, from the repository root):
    .venv/bin/python tests/python/bench_agent.py [--bin-dir target/release] [--calls 200]

A benchmark, not a test: it prints figures and fails nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conftest  # noqa: E402


def size(model) -> int:
    return len(model.model_dump_json(by_alias=True, exclude_none=True).encode())


def text_bytes(result) -> int:
    return sum(len(c.text.encode()) for c in result.content if getattr(c, "text", None) is not None)


def structured_bytes(result) -> int:
    s = getattr(result, "structured_content", None)
    return len(json.dumps(s, separators=(",", ":")).encode()) if s is not None else 0


def client_cpu() -> float:
    """This process's CPU time so far (user + system), in seconds."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def main(args: argparse.Namespace) -> None:
    os.environ["CUBA_EXEC_BIN_DIR"] = str(Path(args.bin_dir).resolve())
    world = conftest.World("legacy")
    rows = []
    try:
        async with world.client() as c:
            tools = await c.list_tools()
            rows.append(("tools/list result bytes", f"{size(tools)}", "≤ 8192"))
            rows.append(("instructions bytes", f"{len((c.instructions or '').encode())}", ""))

            # list_processes with 0, 200 and 2000 finished records.
            async def listing(label: str) -> None:
                times = []
                res = None
                for _ in range(20):
                    t = time.perf_counter()
                    res = await c.call_tool("list_processes", {})
                    times.append(time.perf_counter() - t)
                rows.append(
                    (
                        f"list_processes, {label}",
                        f"{text_bytes(res)}+{structured_bytes(res)} B {median_ms(times):.2f} ms",
                        "≤ 2048 B",
                    )
                )

            await listing("0 finished")
            for _ in range(200):
                await c.call_tool("run", {"command": "true"})
            await listing("200 finished")

            # Warm up, then the echo split, interleaved so that all three see the same machine.
            for _ in range(20):
                await c.call_tool("run", {"command": "echo hi"})
            floor, ping, bare, ours = [], [], [], []
            cpu_ping = cpu_run = 0.0
            reply = None
            for _ in range(args.calls):
                t = time.perf_counter()
                subprocess.run(["/bin/sh", "-c", "echo hi"], stdout=subprocess.DEVNULL, check=True)
                floor.append(time.perf_counter() - t)
                t, u = time.perf_counter(), client_cpu()
                await c.send_ping()
                ping.append(time.perf_counter() - t)
                cpu_ping += client_cpu() - u
                t, u = time.perf_counter(), client_cpu()
                reply = await c.call_tool("run", {"command": "echo hi"})
                ours.append(time.perf_counter() - t)
                cpu_run += client_cpu() - u
            # A tools/call the server answers at once (an argument error): the client's own
            # cost of a tool call, beyond a ping. In a loop of its own, in the same rhythm
            # (a direct `sh -c`, a ping, the call): placed between the ping and the run it
            # made the client's next call 0.03-0.05 ms slower (client-side: the same server,
            # with and without it), which is no part of the split above.
            for _ in range(args.calls):
                subprocess.run(["/bin/sh", "-c", "echo hi"], stdout=subprocess.DEVNULL, check=True)
                await c.send_ping()
                t = time.perf_counter()
                await c.call_tool("run", {"command": ""})
                bare.append(time.perf_counter() - t)
            f, p, b, r = median_ms(floor), median_ms(ping), median_ms(bare), median_ms(ours)
            n = max(args.calls, 1)
            rows.append(('sh -c "echo hi" (floor), median', f"{f:.3f} ms", ""))
            rows.append(("ping round trip, median", f"{p:.3f} ms", ""))
            rows.append(("tools/call answered at once, median", f"{b:.3f} ms", ""))
            rows.append(('run "echo hi", median', f"{r:.3f} ms", ""))
            rows.append(("  ours = run - floor - ping", f"{r - f - p:.3f} ms", "≤ 0.3 ms"))
            rows.append(("  ours beyond a bare tools/call", f"{r - f - b:.3f} ms", ""))
            rows.append(
                (
                    "  client CPU: ping / run call",
                    f"{cpu_ping / n * 1e3:.3f} / {cpu_run / n * 1e3:.3f} ms",
                    "",
                )
            )
            text = reply.content[0].text if reply is not None else ""
            rows.append(("echo reply text beyond output", f"{len(text.encode()) - 3} B", "≤ 60 B"))

            have = 200 + 20 + args.calls
            while have < 2000:
                await c.call_tool("run", {"command": "true"})
                have += 1
            await listing("2000 finished")
    finally:
        world.cleanup()
    width = max(len(r[0]) for r in rows)
    for name, value, goal in rows:
        print(f"{name:<{width}}  {value:>24}  {goal}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin-dir", default="target/release")
    p.add_argument("--calls", type=int, default=200)
    anyio.run(main, p.parse_args())
