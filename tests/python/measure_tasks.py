"""What a long command costs the model in Claude Code 2.1.328, before MCP tasks (polling) and after
(a task and its notification): the figures of the closing note of "MCP tasks".

Usage (the real client installed by `scripts/clients install`, the binaries in target/release):

    cd /work/main && source .venv/bin/activate
    python tests/python/measure_tasks.py --out /tmp/tasks-measure.json [--reps 3]
        [--command 'sleep 20; echo done' --command 'sleep 2; seq 1 450000']

For each command (default: `sleep 20; echo done`, and `sleep 2; seq 1 450000`, ~3 MB of output)
and each of two ways, `--reps` times (default 3), with a private `cubad` (conftest.World), a fresh
HOME and the real `cuba-exec` from the entry `cubactl setup --client claude-code` writes:

- before (polling): `claude -p` (client_claude.Driver), which declares no tasks extension, so a
  `run` still going after its yield answers with its id. The stand-in model calls
  `run {command}` (default yield_ms: 10 s), then, while the last result's header says
  `state:running`, `wait {id, since: next}` with id and next read from that header (default
  timeout); the first result that is not running is the result.
- after (tasks): the interactive Claude Code in a pseudo-terminal (client_claude_tty.Driver), which
  declares the extension, so the call becomes a task: the model reads Claude Code's note at once
  and answers it with a short text; the result comes in a new turn as a `<task-notification>`.
  The run ends when that notification reaches the stand-in (or, for a command that ends within
  the yield, when the inline result does: no task then).

Measured per run:
- `turns`: the model turns spent from the call to the result: the stand-in's requests of the main
  conversation that carry a result of our tools or a task notification, up to and including the
  one that brings the final result;
- `delay_ms`: from the process's exit (the daemon's `ended_at_ms`, `cubactl ps --json`) to the
  request that brought the final result;
- `bytes`: the UTF-8 bytes the model read of our results in all: every tool result text (the
  run's, each wait's, Claude Code's note) plus each notification's `<task-notification>` block
  (the JSON keeps, as `message_bytes`, the whole user message around it too);
- `call_to_result_s`: from the request answered with the `run` call to the one bringing the result;
- `wall_s`: the whole client run, start to end;
- `path`: `polled` (run, then waits), `inline` (run gave the result), `task` (notification).

Prints a markdown table (median and range of each figure) and writes every run's raw numbers
(and the texts the model read) as JSON to `--out`. Every process is cleaned up: the client's whole
process group is killed by its driver, the daemon and its processes by the World's clean-up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import client_claude
import client_claude_tty as tty
from clients_harness import Call, StandIn
from conftest import World
from test_client_tasks import process
from test_clients import header

COMMANDS = ["sleep 20; echo done", "sleep 2; seq 1 450000"]
WAYS = ["before", "after"]
# Polls at most (the -p run's script: run, then this many waits).
MAX_WAITS = 20
# In a scripted wait's arguments: the id and cursor of the last result's header.
LAST_ID = "$LAST_ID"
LAST_NEXT = "$LAST_NEXT"
HEAD = re.compile(r"^\[id:(\d+)([^\]]*)\]", re.M)
NEXT = re.compile(r"\bnext:(\d+)")


def running(text: str) -> bool:
    """Our header says the process runs on (or waits for input): not a result yet."""
    h = header(text)
    return "state:running" in h or "state:waiting_input" in h


class PollingStandIn(StandIn):
    """The stand-in as a model that polls: its script is `run`, then `wait`s; a wait's `$LAST_ID`
    and `$LAST_NEXT` are filled from the last result's header, and once a result is not running
    it answers with the closing text. Records each main-conversation request's time."""

    def __init__(self, api: Any, script: list[Call], closing: str = "All done.") -> None:
        super().__init__(api, script, closing)
        # (time, number of our results in the request, index among all requests).
        self.turns: list[tuple[float, int, int]] = []

    def turn(self, now: float, conv: Any, index: int) -> None:
        self.turns.append((now, len(conv.results), index))

    def finished(self, conv: Any) -> bool:
        return bool(conv.results) and not running(conv.results[-1].text)

    def args_for(self, call: Call, conv: Any) -> dict[str, Any]:
        return {k: v for k, v in ((k, self._fill(v, conv)) for k, v in call.args.items()) if v is not None}

    @staticmethod
    def _fill(value: Any, conv: Any) -> Any:
        if value not in (LAST_ID, LAST_NEXT) or not conv.results:
            return value
        m = HEAD.search(conv.results[-1].text)
        if not m:
            return None
        if value == LAST_ID:
            return int(m.group(1))
        n = NEXT.search(m.group(2))
        return int(n.group(1)) if n else None


@contextlib.contextmanager
def polling_standin() -> Iterator[list[PollingStandIn]]:
    """client_claude.Driver.run, served by the polling stand-in: it builds its stand-in by the
    module's name `StandIn`, replaced here by a maker that keeps each one (yielded) for its
    request times."""
    made: list[PollingStandIn] = []

    def make(api: Any, script: list[Call]) -> PollingStandIn:
        made.append(PollingStandIn(api, script))
        return made[-1]

    old = client_claude.StandIn
    client_claude.StandIn = make  # type: ignore[misc, assignment]
    try:
        yield made
    finally:
        client_claude.StandIn = old  # type: ignore[misc]


@contextlib.contextmanager
def place() -> Iterator[tuple[World, Path, Path]]:
    """As test_client_tasks.place: a private daemon, a fresh HOME with a project folder."""
    world = World("legacy")
    home = Path(tempfile.mkdtemp(prefix="ck", dir="/tmp"))
    work = home / "project"
    work.mkdir()
    try:
        yield world, home, work
    finally:
        world.cleanup()
        shutil.rmtree(home, ignore_errors=True)


def utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def before(command: str) -> dict[str, Any]:
    """`claude -p`: run, then wait while running."""
    script = [Call("run", {"command": command})] + [Call("wait", {"id": LAST_ID, "since": LAST_NEXT})] * MAX_WAITS
    with place() as (world, home, work):
        driver = client_claude.Driver()
        if not driver.installed():
            raise SystemExit(f"{driver.name}@{driver.version} is not installed (scripts/clients install)")
        started = time.monotonic()
        with polling_standin() as made:
            run = driver.run(world, home, work, script)
        wall = time.monotonic() - started
        proc = process(world, command)
    standin_turns = made[0].turns
    seen = run.seen
    final = next((i for i, s in enumerate(seen) if not running(s.text)), None)
    out: dict[str, Any] = {
        "returncode": run.returncode,
        "errors": run.record.errors,
        "wall_s": round(wall, 2),
        "results": [{"tool": s.name, "bytes": utf8(s.text), "header": header(s.text), "text": s.text} for s in seen],
        "notifications": [],
        "process": proc,
    }
    if final is None:
        out.update(path="unfinished", turns=None, delay_ms=None, bytes=sum(utf8(s.text) for s in seen), call_to_result_s=None)
        return out
    read = seen[: final + 1]
    out["path"] = "polled" if final > 0 else "inline"
    out["bytes"] = sum(utf8(s.text) for s in read)
    # Requests carrying our results, up to the first that carried the final one.
    carrying = [t for t in standin_turns if 1 <= t[1] <= final + 1]
    firsts = {}
    for t in carrying:
        firsts.setdefault(t[1], t)
    out["turns"] = len(carrying)
    out["duplicates"] = len(carrying) - len(firsts)
    at = firsts[final + 1][0]
    call = max((t for t in standin_turns if t[1] == 0), key=lambda t: t[0], default=None)
    out["call_to_result_s"] = round(at - call[0], 2) if call else None
    ended = proc.get("ended_at_ms")
    out["delay_ms"] = int(at * 1000) - int(ended) if ended else None
    return out


def carrier(run: tty.TtyRun, n: tty.Notification) -> str:
    """The whole user message that brought notification `n` (Claude Code's `<system-reminder>`
    around the `<task-notification>` block), as the model read it."""
    body = run.record.requests[n.request]["body"]
    for m in body.get("messages") or []:
        text = client_claude._text_of(m.get("content")) if m.get("role") == "user" else ""
        if n.text in text:
            return text
    return n.text


def after(command: str) -> dict[str, Any]:
    """The interactive UI: run; the note's turn answered with a text; the notification ends it."""

    def ended(s: tty.TaskStandIn) -> bool:
        api: tty.TaskApi = s.api  # type: ignore[assignment]
        return bool(api.notifications) or any(r.text.startswith("[id:") and not running(r.text) for r in s.seen())

    with place() as (world, home, work):
        driver = tty.Driver()
        if not driver.installed():
            raise SystemExit(f"{driver.name}@{driver.version} is not installed (scripts/clients install)")
        run = driver.run(world, home, work, [Call("run", {"command": command})], until=ended)
        proc = process(world, command)
    seen = run.seen
    out: dict[str, Any] = {
        "returncode": run.returncode,
        "errors": run.record.errors,
        "reached": run.reached,
        "wall_s": round(run.wall, 2),
        "results": [{"tool": s.name, "bytes": utf8(s.text), "header": header(s.text), "text": s.text} for s in seen],
        "notifications": [
            {"bytes": utf8(n.text), "message_bytes": utf8(carrier(run, n)), "request": n.request, "status": n.field("status"), "text": n.text}
            for n in run.notifications
        ],
        "process": proc,
    }
    turns = run.turns
    call = max((t for t in turns if t[2] == 0), key=lambda t: t[0], default=None)
    if run.notifications:
        n = run.notifications[0]
        out["path"] = "task"
        at, last_request = n.at, n.request
        read_texts = [s.text for s in seen] + [n.text]
    else:
        final = next((i for i, s in enumerate(seen) if s.text.startswith("[id:") and not running(s.text)), None)
        if final is None:
            out.update(path="unfinished", turns=None, delay_ms=None, bytes=sum(utf8(s.text) for s in seen), call_to_result_s=None)
            return out
        out["path"] = "inline" if final == 0 else "polled"
        first = next(t for t in turns if t[2] >= final + 1)
        at, last_request = first[0], first[1]
        read_texts = [s.text for s in seen[: final + 1]]
    carrying = [t for t in turns if t[2] >= 1 and t[1] <= last_request]
    out["turns"] = len(carrying)
    out["bytes"] = sum(utf8(t) for t in read_texts)
    out["call_to_result_s"] = round(at - call[0], 2) if call else None
    ended_ms = proc.get("ended_at_ms")
    out["delay_ms"] = int(at * 1000) - int(ended_ms) if ended_ms else None
    return out


def spread(values: list[Any]) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "–"
    med = statistics.median(vals)

    def f(v: float) -> str:
        return f"{v:g}" if isinstance(v, int) or float(v).is_integer() else f"{v:.1f}"

    lo, hi = min(vals), max(vals)
    missing = f" ({len(values) - len(vals)} missing)" if len(vals) < len(values) else ""
    return (f(med) if f(lo) == f(hi) else f"{f(med)} ({f(lo)}–{f(hi)})") + missing


def table(runs: list[dict[str, Any]], commands: list[str]) -> str:
    rows = [
        "| command | way | path | model turns | exit → result (ms) | bytes read | call → result (s) | wall (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for command in commands:
        for way in WAYS:
            rs = [r for r in runs if r["command"] == command and r["way"] == way]
            if not rs:
                continue
            paths = ", ".join(sorted({r.get("path", "?") for r in rs}))
            label = "before (polling, `claude -p`)" if way == "before" else "after (tasks, interactive)"
            rows.append(
                f"| `{command}` | {label} | {paths} | {spread([r.get('turns') for r in rs])} | {spread([r.get('delay_ms') for r in rs])} | "
                f"{spread([r.get('bytes') for r in rs])} | {spread([r.get('call_to_result_s') for r in rs])} | {spread([r.get('wall_s') for r in rs])} |"
            )
    return "\n".join(rows)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the JSON file of every run's raw numbers")
    ap.add_argument("--reps", type=int, default=3, help="runs of each command and way (default 3)")
    ap.add_argument("--command", action="append", help="a command to measure (repeatable; default: the two of the note)")
    ap.add_argument("--way", action="append", choices=WAYS, help="only this way (repeatable; default both)")
    args = ap.parse_args(argv)
    commands = args.command or COMMANDS
    ways = args.way or WAYS
    runs: list[dict[str, Any]] = []
    started = time.time()
    # Repetitions outermost: a slow spell of the machine spreads over all combinations.
    for rep in range(1, args.reps + 1):
        for command in commands:
            for way in ways:
                t0 = time.monotonic()
                try:
                    r = before(command) if way == "before" else after(command)
                except Exception as e:  # kept: a failed run is a figure too
                    r = {"path": "failed", "error": repr(e)}
                r = {"command": command, "way": way, "rep": rep, **r}
                runs.append(r)
                print(
                    f"[{rep}/{args.reps}] {way:6} {command!r}: path={r.get('path')} turns={r.get('turns')} "
                    f"delay_ms={r.get('delay_ms')} bytes={r.get('bytes')} call_to_result_s={r.get('call_to_result_s')} "
                    f"wall_s={r.get('wall_s')} ({time.monotonic() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                Path(args.out).write_text(json.dumps({"client": f"{client_claude.NAME}@{client_claude.VERSION}", "started": started, "runs": runs}, indent=1))
    text = table(runs, commands)
    Path(args.out).write_text(json.dumps({"client": f"{client_claude.NAME}@{client_claude.VERSION}", "started": started, "runs": runs, "table": text}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
