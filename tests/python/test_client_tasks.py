"""What the model reads of a long command in Claude Code 2.1.328's interactive UI, where our server
answers it with an MCP task (extension `io.modelcontextprotocol/tasks`, SEP-2663).

Claude Code runs in a pseudo-terminal (client_claude_tty.py) against the stand-in model, with the
real `cuba-exec` from the entry `cubactl setup --client claude-code` writes and a private `cubad`:

- a long `run` (`sleep 3; echo done`, yield_ms 1000): the model's tool result at once is Claude
  Code's text around our note (the process, how to stop it); when the process ends a new turn
  brings the model a `<task-notification>` with our result (`[id:N exit:0 …]`, `done`);
- a 3 MB output: the notification holds head, our cut marker and tail;
- a failure (exit 3): what the model reads of it (status, our header, the error output);
- a cancel: the model calls Claude Code's `TaskStop` on the background task; the process ends in
  cubad, and the model reads TaskStop's answer;
- `claude -p` (client_claude.py), which declares no extension: the old inline reply, unchanged;
- an approval during a task: the call is already a task when a program its command runs is held
  (policy `ask`); `tasks/get` reads `input_required`, Claude Code's `Elicitation` hook (as in
  test_client_approvals.py) answers through `tasks/update`, and the notification follows.

Each test records the model turns spent, the delay from the process's exit (the daemon's
`ended_at_ms`) to the request that brought the notification, and the characters the model read;
`CUBA_EXEC_CLIENTS_REPORT=FILE` writes them as JSON (key `claude-code-tty/<case>`).

`CUBA_EXEC_TASKS_PROBE_SERVER=PATH` runs our server's entry under a recording proxy (`python PATH LOG
-- cuba-exec`) so that the MCP wire is recorded too; nothing in CI sets it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import client_claude
import client_claude_tty as tty
import pytest
from clients_harness import Call
from conftest import World
from test_client_approvals import FORM, add_hook, check_not_leaked
from test_clients import header, place, require  # noqa: F401 (place: a fixture)

# The note's own words (ours): which process runs on, and how to stop it.
STOP = "send_signal(id={id})"




def processes(world: World) -> list[dict[str, Any]]:
    """The daemon's table (`cubactl ps --json`)."""
    done = subprocess.run(
        [str(world.shim.parent / "cubactl"), "ps", "--json"], env=world.env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout or "[]")


def process(world: World, command: str) -> dict[str, Any]:
    found = [p for p in processes(world) if p.get("command") == command]
    assert len(found) == 1, f"processes of {command!r}: {found}"
    return found[0]


def polls(run: tty.TtyRun) -> dict[str, Any]:
    """What the MCP wire shows of the tasks methods (probe server only)."""
    gets = [e["t"] for e in run.wire if e.get("dir") == "C>S" and isinstance(e["msg"], dict) and e["msg"].get("method") == "tasks/get"]
    cancels = [e["msg"] for e in run.wire if e.get("dir") == "C>S" and isinstance(e["msg"], dict) and e["msg"].get("method") == "tasks/cancel"]
    return {
        "tasks_get": len(gets),
        "intervals_ms": [b - a for a, b in zip(gets, gets[1:])],
        "tasks_cancel": cancels,
    }


def measure(run: tty.TtyRun, proc: Optional[dict[str, Any]], call_at: int = 0) -> dict[str, Any]:
    """The turns, the delay from exit to notification, the characters read."""
    turns = run.turns
    first_result = next((i for i, t in enumerate(turns) if t[2] > call_at), None)
    out: dict[str, Any] = {
        "wall_s": round(run.wall, 1),
        "turns": len(turns),
        "turns_from_note": len(turns) - first_result if first_result is not None else None,
        "results": [{"tool": s.name, "chars": len(s.text), "is_error": s.is_error, "text": s.text} for s in run.seen],
        "notifications": [{"chars": len(n.text), "text": n.text} for n in run.notifications],
    }
    ended = (proc or {}).get("ended_at_ms")
    if run.notifications and ended:
        out["exit_to_notification_ms"] = int(run.notifications[0].at * 1000) - int(ended)
    if run.wire:
        out["wire"] = polls(run)
    return out


def report(case: str, data: dict[str, Any]) -> None:
    path = os.environ.get("CUBA_EXEC_CLIENTS_REPORT")
    if not path:
        return
    p = Path(path)
    old = json.loads(p.read_text()) if p.exists() else {}
    old[f"claude-code-tty/{case}"] = {"version": tty.VERSION, **data}
    p.write_text(json.dumps(old, indent=1))


def driver(**kw: Any) -> tty.Driver:
    d = tty.Driver(**kw)
    require(d)
    return d


def check_note(run: tty.TtyRun, proc: dict[str, Any]) -> str:
    """The model's tool result at once: Claude Code's text around our note, which names the
    process and how to stop it."""
    assert run.seen, f"no tool result reached the model; screen: {run.screen[-2000:]}"
    note = run.seen[0].text
    assert "started server-side task" in note and "task notification" in note, f"not a task handle's note: {note!r}"
    assert f"Process {proc['id']}" in note and STOP.format(id=proc["id"]) in note, f"our note does not name the process and how to stop it: {note!r}"
    assert "TaskStop" in note, note
    return note


def notification(run: tty.TtyRun) -> tty.Notification:
    assert run.reached and run.notifications, (
        f"no task notification reached the model; requests {len(run.record.requests)}; results {[s.text[:300] for s in run.seen]}; screen: {run.screen[-2000:]}"
    )
    return run.notifications[0]


def test_a_long_run_ends_in_a_notification(place: Any) -> None:
    world, home, work = place
    # The last line shows how Claude Code hands over `<`, `&`, `>` (it escapes them as XML).
    command = "sleep 3; echo done; echo '<&>'"
    run = driver().run(world, home, work, [Call("run", {"command": command, "yield_ms": 1000})])
    assert not run.record.errors, run.record.errors
    proc = process(world, command)
    note = check_note(run, proc)
    n = notification(run)
    report("a-long-run", {"note": note, "xml_escaped": "&lt;&amp;&gt;" in n.text, **measure(run, proc)})
    assert n.field("status") == "completed", n.text
    result = n.field("result")
    first = header(result)
    assert first.startswith(f"[id:{proc['id']}") and " exit:0" in first, n.text
    assert "\ndone\n" in result, n.text
    # The notification is the whole of a new turn: the model had answered the note's turn.
    assert n.request > 0 and len(run.turns) >= 2, run.turns


def test_b_long_output_keeps_head_marker_and_tail(place: Any) -> None:
    world, home, work = place
    command = "sleep 1.5; seq 1 450000"
    run = driver().run(world, home, work, [Call("run", {"command": command, "yield_ms": 1000})])
    assert not run.record.errors, run.record.errors
    proc = process(world, command)
    assert proc["bytes"] > 3_000_000, proc
    check_note(run, proc)
    n = notification(run)
    report("b-long-output", measure(run, proc))
    result = n.field("result")
    assert header(result).startswith(f"[id:{proc['id']}"), n.text[:300]
    assert "\n1\n2\n3\n" in result, n.text[:500]
    assert "bytes truncated ...]" in result, n.text[:300] + " … " + n.text[-300:]
    assert "449999\n450000" in result[-200:], n.text[-300:]


def test_c_failure(place: Any) -> None:
    world, home, work = place
    command = "sleep 2; echo oops >&2; exit 3"
    run = driver().run(world, home, work, [Call("run", {"command": command, "yield_ms": 1000})])
    assert not run.record.errors, run.record.errors
    proc = process(world, command)
    check_note(run, proc)
    n = notification(run)
    report("c-failure", measure(run, proc))
    # Our header, the error line and the error output, in whatever form Claude Code hands over a
    # failed result.
    assert f"[id:{proc['id']} exit:3" in n.text and "EXIT" in n.text and "oops" in n.text, n.text


def test_d_the_model_stops_a_task(place: Any) -> None:
    world, home, work = place
    command = "sleep 120"
    script = [Call("run", {"command": command, "yield_ms": 1000}), Call("TaskStop", {"task_id": tty.BACKGROUND_TASK})]

    def stopped(s: tty.TaskStandIn) -> bool:
        if len(s.seen()) < 2:
            return False
        return any(p.get("command") == command and p.get("state") not in ("running", "waiting_input") for p in processes(world))

    run = driver().run(world, home, work, script, until=stopped)
    assert not run.record.errors, run.record.errors
    proc = process(world, command)
    report("d-cancel", {"process": proc, **measure(run, proc)})
    check_note(run, proc)
    assert len(run.seen) >= 2, [s.text for s in run.seen]
    stop = run.seen[1]
    assert stop.name == "TaskStop", stop
    assert proc["state"] not in ("running", "waiting_input"), f"the process did not end: {proc}"
    if run.wire:
        assert polls(run)["tasks_cancel"], "no tasks/cancel on the wire"


def test_e_print_mode_keeps_the_inline_reply(place: Any) -> None:
    """`claude -p` declares no extension: the long run's reply is the old inline one."""
    world, home, work = place
    command = "sleep 3; echo done"
    log = home / "wire.jsonl"
    probe = os.environ.get(tty.PROBE_ENV)
    configure = None
    if probe:
        configure = tty.through_probe(probe, log, lambda w, h: client_claude.cubactl_setup(w, h, client_claude.NAME))
    d = client_claude.Driver(configure=configure)
    require(d)
    started = time.monotonic()
    run = d.run(world, home, work, [Call("run", {"command": command, "yield_ms": 1000})])
    wall = time.monotonic() - started
    assert not run.record.errors, run.record.errors
    assert run.seen, f"no result reached the model; stderr: {run.stderr[-2000:]}"
    text = run.seen[0].text
    proc = process(world, command)
    wire = tty.read_wire(log)
    report("e-print-mode", {"wall_s": round(wall, 1), "text": text, "chars": len(text), "wire_tasks_get": sum(1 for e in wire if isinstance(e["msg"], dict) and e["msg"].get("method") == "tasks/get")})
    first = header(text)
    assert first.startswith(f"[id:{proc['id']} state:running"), text
    assert "server-side task" not in text and "task notification" not in text, text
    calls = [e["msg"] for e in wire if e.get("dir") == "C>S" and isinstance(e["msg"], dict) and e["msg"].get("method") == "tools/call"]
    for c in calls:
        caps = ((c["params"].get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities") or {})
        assert "io.modelcontextprotocol/tasks" not in (caps.get("extensions") or {}), c


def test_f_an_approval_then_the_command_runs_on(place: Any) -> None:
    """Policy `ask` for `touch *`, held at its exec while the call is already a task: `tasks/get`
    is `input_required`, the person (an `Elicitation` hook, as in test_client_approvals.py)
    approves once through `tasks/update`, and the result comes as the task's notification."""
    world, home, work = place
    marker = work / "marker"
    # The command's text runs a script: the parse-time check cannot see its `touch`, the exec
    # check holds it mid-run, while the call is already a task.
    (work / "mk.sh").write_text(f"touch {marker}\n")
    command = "sleep 2; sh ./mk.sh && sleep 1 && echo made"
    hook_log = home / "hook.jsonl"
    server_env = {"CUBA_EXEC_ASK_COMMANDS": "touch *", "CUBA_EXEC_APPROVALS": str(home / "approvals.toml"), "CUBA_EXEC_NOTIFY": "off"}
    if os.environ.get(tty.PROBE_ENV):
        server_env["PROBE_ASK_AS_TASK"] = "1"
    hook_env = {"APPROVAL_HOOK_LOG": str(hook_log), "APPROVAL_HOOK_DECISION": "approve_once"}
    add_hook(home)

    def read(s: tty.TaskStandIn) -> bool:
        api: tty.TaskApi = s.api  # type: ignore[assignment]
        # Not the note (it quotes the command): a result, inline or notified.
        return bool(api.notifications) or any(r.text.startswith("[id:") and "made" in r.text for r in s.seen())

    run = driver(server_env=server_env, extra_env=hook_env).run(world, home, work, [Call("run", {"command": command, "yield_ms": 1000})], until=read)
    assert not run.record.errors, run.record.errors
    asked = [json.loads(line) for line in hook_log.read_text().splitlines()] if hook_log.exists() else []
    proc = process(world, command)
    task = bool(run.seen) and "started server-side task" in run.seen[0].text
    updates = [e["msg"] for e in run.wire if e.get("dir") == "C>S" and isinstance(e["msg"], dict) and e["msg"].get("method") == "tasks/update"]
    report("f-approval", {"path": "task" if task else "inline", "asked": asked, "tasks_update": updates, **measure(run, proc)})
    assert len(asked) == 1, f"the hook was asked {len(asked)} times: {asked}"
    assert FORM in asked[0].get("message", ""), asked
    assert marker.exists(), f"approved, but the command did not run; the model read: {[s.text for s in run.seen]}"
    check_not_leaked(run)
    assert task, f"the call did not become a task: {[s.text for s in run.seen]}"
    if task:
        check_note(run, proc)
        n = notification(run)
        assert f"[id:{proc['id']} exit:0" in n.text and "made" in n.text, n.text
    else:
        text = run.seen[0].text
        assert f"[id:{proc['id']} exit:0" in text and "made" in text, text
