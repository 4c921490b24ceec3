"""Probe: what Claude Code hands the model for cuba-exec's tool results (not a pytest test).

    .venv/bin/python tests/python/probe_claude.py

Runs the common scenario once against the pinned Claude Code, the stand-in model first calling
ToolSearch with keyword queries (as a model does that knows only that our tools exist), and
prints per call the characters the model got and the text (head and tail when long), the tools
offered, where our instructions appeared, the searches and the client's exit code. With env
PROBE_REPORT=<path> it also writes a JSON report there. PROBE_STRACE=<path> runs the client
under `strace -f -e trace=connect` (to check it reaches no host but the stand-in; the daemon is
started first so that strace does not follow it);
PROBE_SEARCH='["q", ...]' replaces the queries ('null': one `select:` query of the script's
tools); PROBE_ENV='{"K": "V"}' adds client environment (e.g. MAX_MCP_OUTPUT_TOKENS), and
PROBE_SERVER_ENV the server's (e.g. CUBA_EXEC_STRUCTURED=always, CUBA_EXEC_MAX_OUTPUT=1000000).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients_harness import Call  # noqa: E402
from client_claude import NAME, VERSION, Driver  # noqa: E402
from conftest import World  # noqa: E402

SCRIPT = [
    Call("run", {"command": "printf 'a\\tb \"q\"\\n'; seq 1 3"}),
    Call("run", {"command": "echo oops >&2; exit 3"}),
    Call("start", {"command": "sleep 30", "name": "sleeper"}),
    Call("list_processes", {}),
    Call("run", {"command": "printf 'Name? '; read n; echo hi $n"}),
    Call("run", {"command": "seq 1 200000"}),
]
SEARCH = ["run shell command", "background process", "send input", "kill process"]
INSTRUCTIONS_START = "Shell commands on a daemon"


def show(text: str) -> str:
    if len(text) <= 800:
        return text
    return f"{text[:400]}\n[... {len(text) - 800} chars ...]\n{text[-400:]}"


def start_daemon(world: World) -> None:
    """Starts the world's daemon ahead of the client (one `list_processes` through a shim of
    our own), so that under strace -f the daemon is not the client's descendant: strace would
    wait for it to exit."""
    shim = subprocess.Popen([str(world.shim)], env=world.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert shim.stdin is not None and shim.stdout is not None
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_processes", "arguments": {}}},
    ]
    for m in messages:
        shim.stdin.write(json.dumps(m) + "\n")
        shim.stdin.flush()
        if "id" in m:
            while json.loads(shim.stdout.readline()).get("id") != m["id"]:
                pass
    shim.stdin.close()
    shim.wait(10)


def instructions_place(run: Any) -> str:
    """Where our instructions are in the fullest request: the `system` prompt or a message."""
    bodies = [r["body"] for r in run.record.requests if isinstance(r["body"], dict) and r["body"].get("messages")]
    if not bodies:
        return "no request"
    body = max(bodies, key=lambda b: len(b["messages"]))
    if INSTRUCTIONS_START in json.dumps(body.get("system")):
        return "in the system prompt"
    for i, m in enumerate(body["messages"]):
        if INSTRUCTIONS_START in json.dumps(m.get("content")):
            return f"in messages[{i}] (role {m.get('role')!r})"
    return "in no part of the request"


def main() -> int:
    search = json.loads(os.environ["PROBE_SEARCH"]) if "PROBE_SEARCH" in os.environ else SEARCH
    extra = json.loads(os.environ.get("PROBE_ENV") or "{}")
    server_env = json.loads(os.environ.get("PROBE_SERVER_ENV") or "{}")
    wrapper = ["strace", "-f", "-e", "trace=connect", "-o", os.environ["PROBE_STRACE"]] if os.environ.get("PROBE_STRACE") else []
    world = World("legacy")
    home = Path(tempfile.mkdtemp(prefix="cchome", dir="/tmp"))
    try:
        workdir = home / "work"
        workdir.mkdir()
        if wrapper:
            start_daemon(world)
        run = Driver(extra_env=extra, wrapper=wrapper, server_env=server_env).run(world, home, workdir, SCRIPT, search=search)
        last = run.record.last
        tools = sorted(last.tools) if last else []
        preamble = last.preamble if last else ""
        at = preamble.find(INSTRUCTIONS_START)
        print(f"client: claude-code {VERSION}   exit code: {run.returncode}")
        print(f"tools offered (declared in `tools`): {tools}")
        print(f"deferred (named in the system message): {run.deferred}")
        for query, found in run.searches or []:
            print(f"ToolSearch {query!r} -> {found}")
        where = instructions_place(run)
        if at >= 0:
            print(f"instructions: {where}, after:\n  {preamble[max(0, at - 200):at]!r}")
        else:
            print(f"instructions: not in the preamble ({where})")
        paths = sorted({f"{r['method']} {r['path']}" for r in run.record.requests})
        print(f"requests: {len(run.record.requests)} {paths}")
        if run.record.errors:
            print(f"stand-in errors: {run.record.errors}")
        calls = []
        for call, seen in zip(SCRIPT, run.seen):
            print(f"\n--- {seen.name} {json.dumps(call.args)}  chars={len(seen.text)} is_error={seen.is_error}")
            print(show(seen.text))
            calls.append({"tool": call.tool, "args": call.args, "chars": len(seen.text), "text": seen.text, "raw": seen.raw, "is_error": seen.is_error})
        if len(run.seen) < len(SCRIPT):
            print(f"\nonly {len(run.seen)} of {len(SCRIPT)} results seen")
            print("stdout:", run.stdout[-2000:])
            print("stderr:", run.stderr[-2000:])
        tool_results = home / ".claude" / "projects"
        saved = sorted(str(p) for p in tool_results.rglob("tool-results/*")) if tool_results.exists() else []
        if saved:
            print(f"\nfiles under tool-results: {saved}")
        if os.environ.get("PROBE_REPORT"):
            report = {
                "client": NAME,
                "version": VERSION,
                "calls": calls,
                "tools": tools,
                "deferred": run.deferred,
                "searches": run.searches,
                "instructions_in_preamble": at >= 0,
                "instructions_place": where,
                "count_tokens_answers": run.counted,
                "exit_code": run.returncode,
            }
            Path(os.environ["PROBE_REPORT"]).write_text(json.dumps(report, indent=2) + "\n")
        return 0 if len(run.seen) == len(SCRIPT) else 1
    finally:
        world.cleanup()
        if not os.environ.get("PROBE_KEEP_HOME"):
            shutil.rmtree(home, ignore_errors=True)
        else:
            print(f"home kept: {home}")


if __name__ == "__main__":
    sys.exit(main())
