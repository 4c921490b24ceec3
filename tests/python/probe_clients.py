"""Prints what each real coding client hands its model for our replies: the scripted calls of
test_clients.py through one client (or all), with the characters received and the text itself
(the first and last 400 characters of a long one). Not a test: for reading and for measuring.

    .venv/bin/python tests/python/probe_clients.py [CLIENT ...] [--report FILE] [--env K=V ...]
                                                   [--by-hand]

CLIENT is a key of test_clients.DRIVERS (claude-code, codex, codex-unknown-model, gemini,
opencode, copilot, kilo, qwen, cline), all by default. `--env K=V` adds a variable to our
server's entry (e.g. CUBA_EXEC_STRUCTURED=always, CUBA_EXEC_MAX_OUTPUT=100K).
CUBA_EXEC_BIN_DIR picks the build (default target/release), as for the tests. `--report FILE` writes everything as JSON.
`--by-hand` writes each client's MCP entry as the driver's `configure_by_hand` does instead of
with `cubactl setup`: for builds older than setup.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_clients  # noqa: E402
from conftest import World  # noqa: E402


def show(text: str) -> str:
    return repr(text) if len(text) <= 800 else f"{text[:400]!r} … {text[-400:]!r}"


def by_hand(key: str, server_env: dict[str, str]) -> dict:
    """The driver settings that write the entry by hand (each driver names it its own way)."""
    module = importlib.import_module(test_clients.DRIVERS[key][0])
    if module.NAME in ("claude-code", "opencode", "kilo", "qwen"):
        return {"configure": lambda world, home: module.configure_by_hand(world, home, server_env)}
    return {"configure": "hand" if module.NAME == "copilot" else "by_hand"}


def probe(key: str, server_env: dict[str, str], hand: bool) -> dict:
    extra = by_hand(key, server_env) if hand else {}
    d = test_clients.driver(key, server_env=server_env, **extra)
    if not d.installed():
        return {"error": f"{d.name} {d.version} is not installed: run scripts/clients install"}
    world = World("legacy")
    home = Path(tempfile.mkdtemp(prefix="pr", dir="/tmp"))
    work = home / "project"
    work.mkdir()
    try:
        script = test_clients.script_for(d)
        run = d.run(world, home, work, script)
        tools = sorted(run.record.last.tools) if run.record.last else []
        return {
            "client": d.name,
            "version": d.version,
            "returncode": run.returncode,
            "tools": tools,
            "problems": test_clients.problems(run, d),
            "calls": [
                {"tool": c.tool, "args": c.args, "chars": len(s.text), "text": s.text, "raw": s.raw}
                for c, s in zip(script, run.seen)
            ],
        }
    finally:
        world.cleanup()
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("clients", nargs="*", help="keys of test_clients.DRIVERS (default: all)")
    p.add_argument("--report", help="write the results as JSON to this file")
    p.add_argument("--env", action="append", default=[], help="K=V for our server's entry")
    p.add_argument("--by-hand", action="store_true", help="write the entries without cubactl setup")
    a = p.parse_args()
    server_env = dict(kv.split("=", 1) for kv in a.env)
    keys = a.clients or list(test_clients.DRIVERS)
    unknown = [k for k in keys if k not in test_clients.DRIVERS]
    if unknown:
        p.error(f"unknown client {unknown}; known: {', '.join(test_clients.DRIVERS)}")
    results = {}
    for key in keys:
        r = results[key] = probe(key, server_env, a.by_hand)
        if "error" in r:
            print(f"== {key}: {r['error']}")
            continue
        print(f"== {key} {r['version']}: exit {r['returncode']}; chars per call {[c['chars'] for c in r['calls']]}")
        print(f"   tools offered: {', '.join(r['tools'])}")
        for c in r["calls"]:
            print(f"   {c['tool']} {json.dumps(c['args'])}: {c['chars']} chars\n      {show(c['text'])}")
        for problem in r["problems"]:
            print(f"   PROBLEM: {problem}")
    if a.report:
        Path(a.report).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
