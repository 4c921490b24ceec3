"""What the model reads of a long command in GitHub Copilot CLI 1.0.102 with `--experimental`, where
our server answers it with an MCP task (extension `io.modelcontextprotocol/tasks`, SEP-2663).

Copilot run headless (`copilot -p`, as client_copilot.py runs it) against the stand-in model, with
the real `cuba-exec` and a private `cubad`:

- a long `run` (`sleep 3; echo done`, yield_ms 1000): the model's immediate answer is Copilot's
  background-agent note (`MCP task started in background with agent_id: <uuid>. Use read_agent
  …`), and once the process has ended the model reads our result (header `[id:N exit:0 …]`,
  `done`) through Copilot's `read_agent` tool (`wait: true`), as Copilot tells the model to;
- a 3 MB output: head, our cut marker and tail, inline;
- a failure (exit 3): our view (`exit:3`, `EXIT`, the error output);
- without `--experimental` (Copilot then declares no extension): the old inline reply, unchanged.

What Copilot 1.0.102 does (measured with a stand-in server, docs in the report of this change):
it speaks 2026-07-28 (`server/discover`, no initialize) and, with `--experimental` only,
declares `"extensions": {"io.modelcontextprotocol/tasks": {}}` in the per-request
`_meta["io.modelcontextprotocol/clientCapabilities"]` of every request. Its `tools/call` is the
same plain request either way (no `params.task`); it reads a task handle (`resultType: "task"`)
only from a tool listed with `execution.taskSupport: "required"` (with `"optional"` or none it
fails the call: `expected CallToolResult from tools/call, got CreateTaskResult…`), and a plain
result from such a tool is read as before. It then polls `tasks/get` every `pollIntervalMs`
(the first at once) until `completed` (`result` inline), `failed` or `cancelled`; it answers an
`input_required` at once with `tasks/update` (`-p` declines every form); SIGINT sends
`tasks/cancel`. `copilot -p` does not exit before the task has ended, but the model reads the
result only through `read_agent` or, when it is still working at that moment, through the
`<system_notification>` turn Copilot adds (with a `read_agent` call and its result made for it).

These tests fail until the shim answers tasks. `CUBA_EXEC_TASKS_PROBE_SERVER=PATH` runs our
server's entry under that stand-in (a proxy in front of the real `cuba-exec`, `PATH LOG -- cuba-exec`,
answering a still-running `run` with a task as the shim is planned to): a test-only switch to
prove the tests. `CUBA_EXEC_CLIENTS_REPORT=FILE` adds what the model read, its turns, the delay
from the process's exit to the model's reading of the result, and the bytes read, as JSON.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Optional

import pytest
from api_chat import ChatApi
from clients_harness import Call, Conversation, Run, Seen
from test_clients import place, require  # noqa: F401 (place: a fixture)

import client_copilot

PROBE = os.environ.get("CUBA_EXEC_TASKS_PROBE_SERVER")
AGENT = "$AGENT"
# Copilot's immediate answer for a task tool call: the background agent's id.
AGENT_ID = re.compile(r"agent_id: ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
READ = Call("read_agent", {"agent_id": AGENT, "wait": True})
# What clients put in place of a result they did not hand over whole (test_clients.py).
NOT_INLINE = ("saved to", "Saved to", "persisted", "Output too large", "Full output")


class TasksApi(ChatApi):
    """Chat Completions as client_copilot.py's stand-in speaks it, plus: the time of each turn
    of the main conversation and how many results it carried; `$AGENT` in a scripted call's
    arguments becomes the agent id Copilot gave for the task."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.turns: list[tuple[float, int]] = []
        self.last: Optional[Conversation] = None

    def conversation(self, path: str, body: Any) -> Optional[Conversation]:
        conv = super().conversation(path, body)
        if conv is not None:
            self.turns.append((time.time(), len(conv.results)))
            self.last = conv
        return conv

    def tool_call(self, h: Any, path: str, body: Any, name: str, args: dict[str, Any], call_id: str) -> None:
        ids = [m.group(1) for s in (self.last.results if self.last else []) for m in [AGENT_ID.search(s.text)] if m]
        if AGENT in json.dumps(args):
            args = json.loads(json.dumps(args).replace(AGENT, ids[-1] if ids else "no-agent-id-given"))
        super().tool_call(h, path, body, name, args, call_id)


class Case:
    """One Copilot run and what it measured."""

    def __init__(self, run: Run, api: TasksApi, started: float, ended: float, log: Optional[Path]) -> None:
        self.run = run
        self.api = api
        self.wall = ended - started
        self.mcp = [json.loads(line) for line in log.read_text().splitlines()] if log and log.exists() else []

    def seen(self) -> list[Seen]:
        return self.run.seen

    def result(self, ended: str, word: str) -> Optional[Seen]:
        """The first result the model read that holds our header of an ended process (`ended`:
        e.g. " exit:0") and `word`."""
        return next((s for s in self.seen() if ended in header(s.text) and word in s.text), None)

    def read_at(self, seen: Seen) -> Optional[float]:
        """When the model first read `seen`: the turn whose conversation first carried it."""
        index = self.seen().index(seen)
        return next((t for t, n in self.api.turns if n > index), None)

    def exit_at(self, seen: Seen, k: int) -> Optional[float]:
        """When the process ended: the start of the call, the `k`th of the script (from the
        stand-in server's log when there is one, else the model's turn that made it) plus the
        `time:` of our header."""
        m = re.search(r" time:(\d+)ms", header(seen.text))
        if not m:
            return None
        calls = [r["t"] for r in self.mcp if r["dir"] == "C>S" and isinstance(r["msg"], dict) and r["msg"].get("method") == "tools/call"
                 and (r["msg"].get("params") or {}).get("name") == "run"]
        if calls:
            start = calls[-1]
        else:
            start = next((t for t, n in self.api.turns if n == k), None)
            if start is None:
                return None
        return start + int(m.group(1)) / 1000

    def polls(self) -> list[float]:
        """The client's tasks/get times, where the stand-in server logged them."""
        return [r["t"] for r in self.mcp if r["dir"] == "C>S" and isinstance(r["msg"], dict) and r["msg"].get("method") == "tasks/get"]


def header(text: str) -> str:
    """Our header line, after what Copilot put before it (`Agent completed. …`, `Error: `)."""
    for line in text.splitlines():
        i = line.find("[id:")
        if i >= 0:
            return line[i:]
    return ""




def copilot(place: Any, script: list[Call], experimental: bool = True) -> Case:
    require(client_copilot.Driver)
    world, home, work = place
    apis: list[TasksApi] = []

    def api(model: str) -> TasksApi:
        apis.append(TasksApi(model))
        return apis[-1]

    log = home / "mcp.jsonl" if PROBE else None
    wrapper = [sys.executable, PROBE, str(log), "--"] if PROBE else None
    d = client_copilot.Driver(experimental=experimental, server_wrapper=wrapper, api=api, timeout=120)
    started = time.time()
    run = d.run(world, home / "h", work, script)
    case = Case(run, apis[0], started, time.time(), log)
    assert not run.record.errors, run.record.errors
    return case


def report(name: str, case: Case, script: list[Call], result: Optional[Seen] = None, k: int = 0, experimental: bool = True) -> None:
    path = os.environ.get("CUBA_EXEC_CLIENTS_REPORT")
    if not path:
        return
    p = Path(path)
    data = json.loads(p.read_text()) if p.exists() else {}
    t0 = case.api.turns[0][0] if case.api.turns else 0.0
    entry: dict[str, Any] = {
        "version": client_copilot.VERSION,
        "experimental": experimental,
        "server": f"stand-in {PROBE}" if PROBE else "cuba-exec",
        "returncode": case.run.returncode,
        "wall_s": round(case.wall, 2),
        # Each request of the main conversation: seconds after the first, results it carried.
        "turns": [{"t": round(t - t0, 3), "results": n} for t, n in case.api.turns],
        "calls": [
            {"tool": s.name, "args": c.args if c else None, "chars": len(s.text), "bytes": len(s.text.encode()), "text": s.text}
            for c, s in zip(script + [None] * len(case.seen()), case.seen())
        ],
    }
    if result is not None:
        exit_at, read_at = case.exit_at(result, k), case.read_at(result)
        entry["result_bytes"] = len(result.text.encode())
        entry["exit_to_result_s"] = round(read_at - exit_at, 3) if exit_at and read_at else None
    polls = case.polls()
    if polls:
        entry["tasks_get"] = {"count": len(polls), "intervals_s": [round(b - a, 3) for a, b in zip(polls, polls[1:])]}
    data[f"copilot-tasks/{name}"] = entry
    p.write_text(json.dumps(data, indent=1))


def immediate(case: Case) -> Seen:
    """The first result: Copilot's note for a task, not our old inline reply."""
    assert case.seen(), f"no result reached the model; stderr: {case.run.stderr[-2000:]}"
    first = case.seen()[0]
    assert AGENT_ID.search(first.text), (
        "the run was not answered as a task (the model read no background agent's id): "
        f"{first.text[:400]!r}"
    )
    assert "state:running" not in first.text, first.text
    return first


def test_long_run_result_reaches_the_model_after_the_task_ends(place: Any) -> None:
    script = [
        # A short command answers inline, as before, even with the tool listed as a task tool.
        Call("run", {"command": "echo hi"}),
        Call("run", {"command": "sleep 3; echo done", "yield_ms": 1000}),
        READ,
    ]
    case = copilot(place, script)
    result = case.result(" exit:0", "\ndone\n")
    report("long_run", case, script, result, k=1)
    seen = case.seen()
    assert seen and header(seen[0].text).startswith("[id:") and " exit:0" in header(seen[0].text), seen[:1]
    assert seen[0].text == f"{header(seen[0].text)}\nhi\n", seen[0].text
    assert len(seen) >= 2, f"only {len(seen)} results reached the model; stderr: {case.run.stderr[-2000:]}"
    first = seen[1]
    assert AGENT_ID.search(first.text) and "state:running" not in first.text, (
        f"the long run was not answered as a task: {first.text[:400]!r}"
    )
    assert result is not None and "\ndone\n" in result.text, [s.text[:400] for s in seen]
    read_at, exit_at = case.read_at(result), case.exit_at(result, 1)
    assert read_at is not None and exit_at is not None and read_at >= exit_at, (read_at, exit_at)
    assert case.run.returncode == 0, case.run.stderr[-2000:]


def test_large_output_head_marker_and_tail(place: Any) -> None:
    # About 3.1 MB of output (numbers 1 … 450000, one a line).
    script = [Call("run", {"command": "sleep 2; seq 1 450000", "yield_ms": 1000}), READ]
    case = copilot(place, script)
    result = case.result(" exit:0", "450000")
    report("large_output", case, script, result)
    immediate(case)
    assert result is not None, [s.text[:400] for s in case.seen()]
    text = result.text
    assert "\n1\n2\n3\n" in text, text[:400]
    assert "bytes truncated ...]" in text, text[:300] + " … " + text[-300:]
    assert "449999\n450000" in text[-200:], text[-300:]
    for word in NOT_INLINE:
        assert word not in text, f"Copilot did not hand it over whole ({word!r}): {text[:300]!r}"


def test_failure_exit_3(place: Any) -> None:
    script = [Call("run", {"command": "sleep 2; echo oops >&2; exit 3", "yield_ms": 1000}), READ]
    case = copilot(place, script)
    result = case.result(" exit:3", "oops")
    report("failure", case, script, result)
    immediate(case)
    assert result is not None, [s.text[:400] for s in case.seen()]
    assert "EXIT" in result.text and "oops" in result.text, result.text


def test_without_experimental_the_old_inline_reply(place: Any) -> None:
    script = [Call("run", {"command": "sleep 3; echo done", "yield_ms": 1000})]
    case = copilot(place, script, experimental=False)
    report("without_experimental", case, script, experimental=False)
    assert case.seen(), case.run.stderr[-2000:]
    text = case.seen()[0].text
    first = header(text)
    assert first.startswith("[id:") and "state:running" in first, text
    assert text.startswith(first) and "still running in the background: wait(id=" in text, text
    assert not AGENT_ID.search(text), text
    # No task was made: the stand-in server (when there is one) saw no tasks/* request.
    assert not case.polls(), case.polls()
