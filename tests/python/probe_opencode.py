"""What opencode hands the model of cuba-exec's tool results: one scripted run, printed.

Run from the repository root:   .venv/bin/python tests/python/probe_opencode.py
PROBE_REPORT=<path> also writes the findings as JSON; OPENCODE_PROBE_LOGS=1 passes opencode's
debug log through (in the run's stderr, printed at the end). `--extra` appends calls that go past
opencode's own limits (2000 lines, 51200 bytes) and an isError result of the same size.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients_harness import Call  # noqa: E402
from client_opencode import OpencodeDriver  # noqa: E402
from conftest import World  # noqa: E402

SCRIPT = [
    Call("run", {"command": "printf 'a\\tb \"q\"\\n'; seq 1 3"}),
    Call("run", {"command": "echo oops >&2; exit 3"}),
    Call("start", {"command": "sleep 30", "name": "sleeper"}),
    Call("list_processes", {}),
    Call("run", {"command": "printf 'Name? '; read n; echo hi $n"}),
    Call("run", {"command": "seq 1 200000"}),
]
# Past opencode's limits: our reply may be 1 MiB (max_output), so opencode's cut shows.
EXTRA = [
    # 52 654 short lines, 360 546 bytes: the 2000-line limit is reached first.
    Call("run", {"command": "seq 1 200000", "max_output": 1048576}),
    # 1000 lines of 201 bytes: the 51 200-byte limit is reached first.
    Call("run", {"command": "i=0; while [ $i -lt 1000 ]; do printf '%0200d\\n' $i; i=$((i+1)); done", "max_output": 1048576}),
    # The same size as the first, failing (isError): opencode does not cut it.
    Call("run", {"command": "seq 1 200000; exit 1", "max_output": 1048576}),
]


def shown(text: str) -> str:
    if len(text) <= 800:
        return text
    return text[:400] + f"\n[... {len(text) - 800} chars not shown ...]\n" + text[-400:]


def main() -> int:
    script = SCRIPT + (EXTRA if "--extra" in sys.argv[1:] else [])
    driver = OpencodeDriver()
    world = World("legacy")
    tmp = Path(tempfile.mkdtemp(prefix="oc", dir="/tmp"))
    try:
        run = driver.run(world, tmp / "home", tmp / "work", script)
        last = run.record.last
        tools = sorted(last.tools) if last else []
        preamble = last.preamble if last else ""
        print(f"client: {driver.name} {driver.version}  exit code: {run.returncode}")
        print(f"tools offered to the model: {tools}")
        at = preamble.find("<mcp_instructions>")
        where = "system prompt, <mcp_instructions> block" if at >= 0 else "not found in the preamble"
        print(f"our instructions: {where}")
        if at >= 0:
            end = preamble.find("</mcp_instructions>", at)
            print(preamble[at : end + len("</mcp_instructions>")] if end >= 0 else preamble[at : at + 800])
        ours = {n: d for n, d in (last.tools.items() if last else []) if n.startswith("cuba-exec")}
        if "cuba-exec_run" in ours:
            print("declaration of cuba-exec_run as sent:", json.dumps(ours["cuba-exec_run"]))
        calls = []
        for i, seen in enumerate(run.seen):
            call = script[i] if i < len(script) else None
            print(f"\n--- call {i + 1}: {seen.name} {json.dumps(call.args) if call else ''}  ({len(seen.text)} chars)")
            print(shown(seen.text))
            calls.append(
                {
                    "tool": call.tool if call else seen.name,
                    "args": call.args if call else None,
                    "chars": len(seen.text),
                    "text": seen.text,
                    "raw": seen.raw,
                    "is_error": seen.is_error,
                    "extra": i >= len(SCRIPT),
                }
            )
        if len(run.seen) < len(script):
            print(f"\nonly {len(run.seen)} of {len(script)} results came back")
        if run.record.errors:
            print("stand-in errors:", run.record.errors)
        print(f"\nrequests to the stand-in: {len(run.record.requests)}")
        for r in run.record.requests:
            print(f"  {r['method']} {r['path']}")
        saved = tmp / "home" / ".local" / "share" / "opencode" / "tool-output"
        files = sorted(saved.iterdir()) if saved.is_dir() else []
        print(f"\nfiles opencode saved full outputs to: {len(files)}")
        for f in files:
            print(f"  {f} {f.stat().st_size} bytes")
        print("\nclient stdout:\n" + run.stdout[-2000:])
        if os.environ.get("OPENCODE_PROBE_LOGS") or run.returncode != 0:
            print("client stderr:\n" + run.stderr[-20000:])
        report = os.environ.get("PROBE_REPORT")
        if report:
            Path(report).write_text(
                json.dumps(
                    {
                        "client": driver.name,
                        "version": driver.version,
                        "exit_code": run.returncode,
                        "calls": calls,
                        "tools": tools,
                        "declarations": ours,
                        "instructions_in_preamble": at >= 0,
                        "preamble": preamble,
                        "saved_outputs": [{"path": str(f), "bytes": f.stat().st_size} for f in files],
                    },
                    indent=2,
                )
            )
        return 0 if run.returncode == 0 and len(run.seen) == len(script) else 1
    finally:
        world.cleanup()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
