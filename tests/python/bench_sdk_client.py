"""What the official Python MCP SDK itself spends on a `run` reply: a stand-in server (this
script with `--serve`) answers at once, with the bytes a `run "echo hi"` reply has, so what
`call_tool` costs beyond a ping is the client's alone. Shapes compared: the reply as served
(text, structuredContent, the tool's outputSchema), without the schema, and text only.

Run:
    .venv/bin/python tests/python/bench_sdk_client.py [--calls 1500]

A benchmark, not a test: it prints figures and fails nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

TEXT = "[id:1 exit:0 time:1ms bytes:3 trunc:no next:3]\nhi\n"
STRUCTURED = {
    "bytes": 3,
    "cpu_ms": 0,
    "exit_code": 0,
    "id": 1,
    "next": 3,
    "output": "hi\n",
    "pid": 4242,
    "state": "exited",
    "time_ms": 1,
}
# `run`'s output schema as tools/list gives it.
SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "next": {"type": "integer"},
        "output": {"type": "string"},
        "state": {"type": "string"},
    },
    "required": ["id", "state", "next", "output"],
}
SHAPES = {
    "served": (True, True),
    "no schema": (False, True),
    "text only": (False, False),
}


def serve(shape: str) -> None:
    """The stand-in server: JSON-RPC lines on stdin and stdout."""
    schema, structured = SHAPES[shape]
    tool = {"name": "run", "description": "r", "inputSchema": {"type": "object"}}
    if schema:
        tool["outputSchema"] = SCHEMA
    result: dict = {"content": [{"type": "text", "text": TEXT}], "isError": False}
    if structured:
        result["structuredContent"] = STRUCTURED
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method = msg.get("method")
        if method == "initialize":
            r = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stand-in", "version": "1"},
            }
        elif method == "tools/list":
            r = {"tools": [tool]}
        elif method == "tools/call":
            r = result
        else:
            r = {}
        reply = {"jsonrpc": "2.0", "id": msg["id"], "result": r}
        out.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
        out.flush()


async def measure(calls: int) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    for shape in SHAPES:
        params = StdioServerParameters(command=sys.executable, args=[__file__, "--serve", shape])
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.list_tools()
            ping, call = [], []
            for _ in range(calls):
                t = time.perf_counter()
                await s.send_ping()
                ping.append(time.perf_counter() - t)
                t = time.perf_counter()
                await s.call_tool("run", {"command": "echo hi"})
                call.append(time.perf_counter() - t)
        p, c = statistics.median(ping) * 1000, statistics.median(call) * 1000
        print(f"{shape:>10}: ping {p:.3f} ms  call_tool {c:.3f} ms  call - ping {c - p:.3f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--serve", choices=list(SHAPES))
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
    else:
        import warnings

        import anyio

        warnings.filterwarnings("ignore")
        anyio.run(measure, args.calls)
