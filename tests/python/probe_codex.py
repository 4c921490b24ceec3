"""Runs the common client scenario once through Codex CLI and prints what the model was handed.

    .venv/bin/python tests/python/probe_codex.py [--model M] [--approval MODE|none] [-c KEY=VALUE]...
                                                 [--server-env K=V]... [--max-output N]
                                                 [--full-access] [--requests] [--dump PATH]

--model M        the model name the stand-in provider serves (default gpt-5.5, a bundled model;
                 an unknown name makes Codex use its fallback metadata, another truncation)
--approval MODE  `default_tools_approval_mode` of our MCP entry (auto|prompt|writes|approve, or
                 none to leave it out; default approve)
-c KEY=VALUE     more Codex config overrides, e.g. -c tool_output_token_limit=2500
--server-env K=V one more variable in our MCP entry's env (e.g. CUBA_EXEC_STRUCTURED=always)
--max-output N   max_output of the long run (call 6), so more than our default cut reaches Codex
--full-access    approval_policy="never" and sandbox_mode="danger-full-access" (under which
                 Codex asks no MCP approval at all); default: codex exec's own (never, read-only)
--requests       also prints every request the stand-in got (method, path)
--dump PATH      writes every request the stand-in got (with bodies) there as JSON
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
from client_codex import MODEL, Driver  # noqa: E402
from conftest import World  # noqa: E402

SCENARIO = [
    Call("run", {"command": "printf 'a\\tb \"q\"\\n'; seq 1 3"}),
    Call("run", {"command": "echo oops >&2; exit 3"}),
    Call("start", {"command": "sleep 30", "name": "sleeper"}),
    Call("list_processes", {}),
    Call("run", {"command": "printf 'Name? '; read n; echo hi $n"}),
    Call("run", {"command": "seq 1 200000"}),
]
# Words of our instructions, as the model must find them.
INSTRUCTIONS = "Shell commands on a daemon shared with other agents and people"


def show(text: str) -> str:
    if len(text) <= 800:
        return text
    return f"{text[:400]}\n[... {len(text) - 800} chars ...]\n{text[-400:]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--approval", default="approve")
    ap.add_argument("-c", dest="config", action="append", default=[])
    ap.add_argument("--server-env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--max-output", type=int, help="max_output of the long run (call 6), to pass more than our default cut to Codex")
    ap.add_argument("--full-access", action="store_true", help='approval_policy="never", sandbox_mode="danger-full-access"')
    ap.add_argument("--requests", action="store_true")
    ap.add_argument("--dump")
    opts = ap.parse_args()
    approval = None if opts.approval == "none" else opts.approval
    server_env = dict(kv.split("=", 1) for kv in opts.server_env)
    script = list(SCENARIO)
    if opts.max_output:
        script[5] = Call("run", {**SCENARIO[5].args, "max_output": opts.max_output})

    world = World("legacy")
    tmp = Path(tempfile.mkdtemp(prefix="cdx", dir="/tmp"))
    home, workdir = tmp / "home", tmp / "work"
    home.mkdir()
    workdir.mkdir()
    try:
        driver = Driver(model=opts.model, approval=approval, extra_config=opts.config, server_env=server_env, full_access=opts.full_access)
        run = driver.run(world, home, workdir, script)
        last = run.record.last
        tools = sorted(last.tools) if last else []
        preamble = last.preamble if last else ""
        print(f"client: codex {Driver.version}  model: {opts.model}  approval: {opts.approval}  config: {opts.config}  full access: {opts.full_access}  server env: {server_env}  exit code: {run.returncode}")
        print(f"tools offered: {tools}")
        body = next((r["body"] for r in reversed(run.record.requests) if isinstance(r["body"], dict) and r["body"].get("tools")), {})
        offered = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        loaded = [t for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") == "tool_search_output" for t in i.get("tools") or [] if isinstance(t, dict)]
        if any(t.get("type") == "tool_search" for t in offered):
            print(f"tool_search offered: our tools are deferred; {len(loaded)} declaration(s) loaded by tool_search")
        where = []
        for source, decls in (("offered in `tools`", offered), ("loaded by tool_search", loaded)):
            for ns in decls:
                if ns.get("type") != "namespace" or "cuba" not in str(ns.get("name")):
                    continue
                print(f"namespace {ns.get('name')!r} ({source}): description {show(str(ns.get('description')))!r}")
                for t in ns.get("tools") or []:
                    props = sorted(((t.get("parameters") or {}).get("properties") or {}))
                    extra = {k: v for k, v in t.items() if k in ("strict", "defer_loading")}
                    print(f"  {t.get('name')}: {extra} properties {props}")
                if INSTRUCTIONS in str(ns.get("description")):
                    where.append(f"description of the tool namespace {ns.get('name')} ({source})")
        if INSTRUCTIONS in preamble:
            at = preamble.find(INSTRUCTIONS)
            line = preamble[preamble.rfind("\n", 0, at) + 1 : preamble.find("\n", at)]
            where.append(f"preamble, a developer message line: {line!r}")
        print(f"our instructions: {'; '.join(where) or 'not found'}")
        print()
        calls = []
        for i, (call, seen) in enumerate(zip(script, run.seen), 1):
            print(f"--- call {i}: {seen.name} {json.dumps(call.args)}  is_error={seen.is_error}  chars={len(seen.text)}  output type={type(seen.raw.get('output')).__name__}")
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
                "client": "codex",
                "version": Driver.version,
                "model": opts.model,
                "approval": opts.approval,
                "config": opts.config,
                "server_env": server_env,
                "full_access": opts.full_access,
                "returncode": run.returncode,
                "calls": calls,
                "tools": tools,
                "instructions_in_preamble": INSTRUCTIONS in preamble,
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
