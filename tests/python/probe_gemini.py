"""Runs the common client scenario once through Gemini CLI and prints what the model was handed.

    .venv/bin/python tests/python/probe_gemini.py [--model M] [--wait-for-previous] [--requests]

--wait-for-previous  adds `"wait_for_previous": false` to every scripted call, as a real Gemini
                     model does (Gemini CLI adds that property to every tool's schema; it does
                     not add the argument itself).
--requests           also prints every request the stand-in got (method, path).
--max-output N       passes max_output=N with call 6 (to see Gemini CLI's own cut above 40 000 chars).
--dump PATH          writes every request the stand-in got (with bodies) there as JSON.
PROBE_REPORT=<path>  writes a JSON report there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients_harness import Call  # noqa: E402
from client_gemini import MODEL, Driver  # noqa: E402
from conftest import World  # noqa: E402

SCENARIO = [
    Call("run", {"command": "printf 'a\\tb \"q\"\\n'; seq 1 3"}),
    Call("run", {"command": "echo oops >&2; exit 3"}),
    Call("start", {"command": "sleep 30", "name": "sleeper"}),
    Call("list_processes", {}),
    Call("run", {"command": "printf 'Name? '; read n; echo hi $n"}),
    Call("run", {"command": "seq 1 200000"}),
]


def show(text: str) -> str:
    if len(text) <= 800:
        return text
    return f"{text[:400]}\n[... {len(text) - 800} chars ...]\n{text[-400:]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--wait-for-previous", action="store_true")
    ap.add_argument("--requests", action="store_true")
    ap.add_argument("--dump")
    ap.add_argument("--max-output", type=int)
    opts = ap.parse_args()
    script = [Call(c.tool, {**c.args, "wait_for_previous": False} if opts.wait_for_previous else dict(c.args)) for c in SCENARIO]
    if opts.max_output:
        script[5].args["max_output"] = opts.max_output

    world = World("legacy")
    tmp = Path(tempfile.mkdtemp(prefix="gem", dir="/tmp"))
    home, workdir = tmp / "home", tmp / "work"
    home.mkdir()
    workdir.mkdir()
    try:
        run = Driver(model=opts.model).run(world, home, workdir, script)
        last = run.record.last
        tools = sorted(last.tools) if last else []
        preamble = last.preamble if last else ""
        print(f"client: gemini-cli {Driver.version}  model: {opts.model}  exit code: {run.returncode}")
        print(f"tools offered: {tools}")
        ours = {n: d for n, d in (last.tools.items() if last else []) if "cuba" in n}
        for n, d in ours.items():
            props = sorted((d.get("parametersJsonSchema") or d.get("parameters") or {}).get("properties") or {})
            print(f"  {n}: properties {props}")
        marker = "instructions provided by the tool server 'cuba-exec'"
        at = preamble.find(marker)
        where = "not found"
        if at >= 0:
            sys_text = ""
            body = next((r["body"] for r in reversed(run.record.requests) if isinstance(r["body"], dict) and r["body"].get("tools")), {})
            sys_text = "\n".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts") or [])
            where = "system instruction" if marker in sys_text else "first user turn"
        print(f"our instructions: {where}")
        if at >= 0:
            print(show(preamble[max(0, at - 200) : at + 600]))
        print()
        calls = []
        for i, (call, seen) in enumerate(zip(script, run.seen), 1):
            print(f"--- call {i}: {seen.name} {json.dumps(call.args)}  is_error={seen.is_error}  chars={len(seen.text)}")
            print(show(seen.text))
            calls.append({"tool": call.tool, "args": call.args, "chars": len(seen.text), "text": seen.text, "raw": seen.raw, "is_error": seen.is_error})
        if len(run.seen) < len(script):
            print(f"!!! only {len(run.seen)} of {len(script)} results came back")
        if opts.requests or run.record.errors:
            print("\nrequests:")
            for r in run.record.requests:
                print(f"  {r['method']} {r['path']}")
        if run.record.errors:
            print(f"stand-in errors: {run.record.errors}")
        print(f"\nstdout:\n{run.stdout[-2000:]}\nstderr:\n{run.stderr[-3000:]}")
        if opts.dump:
            Path(opts.dump).write_text(json.dumps(run.record.requests, indent=2))
        out = os.environ.get("PROBE_REPORT")
        if out:
            report = {
                "client": "gemini",
                "version": Driver.version,
                "model": opts.model,
                "returncode": run.returncode,
                "calls": calls,
                "tools": tools,
                "instructions_in_preamble": at >= 0,
                "instructions_where": where,
                "requests": [{"method": r["method"], "path": r["path"]} for r in run.record.requests],
            }
            Path(out).write_text(json.dumps(report, indent=2))
        return 0
    finally:
        world.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
