"""What the model reads, in the real coding clients: each pinned client (scripts/clients) runs one
scripted conversation against a stand-in model server, launching the real `cuba-exec` from the
entry `cubactl setup` wrote, and the test checks what the client handed the model for each of
our replies (docs/clients.md has the facts per client, DESIGN §11 the goals):

- the compact view reaches the model as text, unescaped: header, output, error line, hint;
- a short successful `run` costs at most 60 characters beyond its output;
- a long output's head, our cut marker and its tail all arrive inline: nothing persisted to a
  file, dropped or cut by the client;
- an `isError` result reads like a success: our text, no dump of the result;
- arguments a client adds to our tools never fail a call;
- our instructions reach the model.

A client that is not installed fails the test under CI (a skip of something this machine has is
a failure there) and is skipped elsewhere, with the command that installs it.
`CUBA_EXEC_CLIENTS_REPORT=FILE` writes what each client handed the model as JSON.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from clients_harness import Call, Run, Seen
from conftest import World

SHORT = "printf 'a\\tb \"q\"\\n'; seq 1 3"
SHORT_OUTPUT = 'a\tb "q"\n1\n2\n3\n'
SCRIPT = [
    Call("run", {"command": SHORT}),
    Call("run", {"command": "echo oops >&2; exit 3"}),
    Call("start", {"command": "sleep 30", "name": "sleeper"}),
    Call("list_processes", {}),
    Call("run", {"command": "printf 'Name? '; read n; echo hi $n"}),
    Call("run", {"command": "seq 1 200000"}),
]
# Words of our instructions, as the model must find them.
INSTRUCTIONS = "Shell commands on a daemon shared with other agents and people"
# What clients put in place of a result they did not hand over whole.
NOT_INLINE = ("saved to", "persisted", "Output too large", "truncated", "tokens truncated", "Full output")

# Each client with the settings that matter: Codex with a model it knows (our tools deferred
# behind its tool_search; a 12 000-token output limit) and with one it does not (every tool
# offered; its smallest limit, 3 000 tokens).
DRIVERS = {
    "claude-code": ("client_claude", {}),
    "codex": ("client_codex", {"model": "gpt-5.5"}),
    "codex-unknown-model": ("client_codex", {"model": "standin-model"}),
    "gemini": ("client_gemini", {}),
    "opencode": ("client_opencode", {}),
    "copilot": ("client_copilot", {}),
    "kilo": ("client_kilo", {}),
    "qwen": ("client_qwen", {}),
    "cline": ("client_cline", {}),
}


def driver(key: str, **extra: Any) -> Any:
    """The driver of `key`; `extra`: more settings (`server_env`: variables of our entry)."""
    module, kwargs = DRIVERS[key]
    return importlib.import_module(module).Driver(**kwargs, **extra)


def script_for(d: Any, script: list[Call] = SCRIPT) -> list[Call]:
    """The scripted calls as this client's model makes them: a Gemini model adds the
    `wait_for_previous` argument the client declares on every tool."""
    if d.name == "gemini":
        return [Call(c.tool, c.args | {"wait_for_previous": False}) for c in script]
    return script


def require(d: Any) -> None:
    if shutil.which("node") is None or not d.installed():
        why = f"{d.name} {d.version} is not installed: run scripts/clients install"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture
def place() -> Any:
    world = World("legacy")
    home = Path(tempfile.mkdtemp(prefix="ch", dir="/tmp"))
    work = home / "project"
    work.mkdir()
    yield world, home, work
    world.cleanup()
    shutil.rmtree(home, ignore_errors=True)


def report(key: str, d: Any, run: Run) -> None:
    path = os.environ.get("CUBA_EXEC_CLIENTS_REPORT")
    if not path:
        return
    p = Path(path)
    data = json.loads(p.read_text()) if p.exists() else {}
    data[key] = {
        "version": d.version,
        "returncode": run.returncode,
        "calls": [
            {"tool": c.tool, "args": c.args, "chars": len(s.text), "text": s.text}
            for c, s in zip(SCRIPT, run.seen)
        ],
    }
    p.write_text(json.dumps(data, indent=1))


def header(text: str) -> str:
    """Our header line: the first line of our text, after what the client put before it
    (Codex's `Wall time: …` and `Output:` lines, Gemini's `<untrusted_context>`)."""
    return next((line for line in text.splitlines() if line.startswith("[id:")), "")


def cline_wrapped(text: str) -> str:
    """Our text as Cline hands it to the model: `JSON.stringify` of a result with one text block
    and nothing else (docs/clients.md)."""
    return json.dumps({"content": [{"type": "text", "text": text}]}, ensure_ascii=False, separators=(",", ":"))


def problems(run: Run, d: Any = None) -> list[str]:
    """Every goal the run missed, in words. A client that hands the model the JSON of our
    result (Cline, whose own handling makes our budgets impossible; docs/clients.md) is judged
    on our text inside it, and that JSON must be the smallest it makes: one text block, nothing
    else, not cut."""
    seen: list[Seen] = run.seen
    bad: list[str] = []
    if len(seen) < len(SCRIPT):
        return [f"only {len(seen)} of {len(SCRIPT)} results reached the model; stderr: {run.stderr[-2000:]}"]
    unwrap = getattr(d, "unwrap", None)
    if unwrap is not None:
        inner = []
        for call, s in zip(SCRIPT, seen):
            text, notes = unwrap(s.text)
            bad += [f"{call.tool}: {note}" for note in notes]
            if s.text != cline_wrapped(text):
                bad.append(f"{call.tool}: not the smallest JSON of our text: {s.text[:300]!r}")
            inner.append(Seen(s.call_id, s.name, text, s.raw, s.is_error))
        seen = inner
    for call, s in zip(SCRIPT, seen):
        if "unknown field" in s.text or "unknown argument" in s.text:
            bad.append(f"{call.tool} failed on an argument: {s.text[:300]!r}")
        if '"structuredContent"' in s.text or '\\"output\\"' in s.text or '"isError"' in s.text:
            bad.append(f"{call.tool}: the model read JSON, not our text: {s.text[:300]!r}")
    short, failing, started, listed, waiting, long = seen[:6]
    first = header(short.text)
    if not (first.startswith("[id:") and " exit:0" in first):
        bad.append(f"short run: no header first: {short.text[:200]!r}")
    if SHORT_OUTPUT.rstrip("\n") not in short.text:
        bad.append(f"short run: output not verbatim: {short.text!r}")
    elif len(short.text) - len(SHORT_OUTPUT) > 60:
        bad.append(f"short run: {len(short.text) - len(SHORT_OUTPUT)} characters beyond the output (≤ 60): {short.text!r}")
    if not ("exit:3" in failing.text and "oops" in failing.text and "EXIT" in failing.text):
        bad.append(f"failing run: not our view: {failing.text[:300]!r}")
    if "state:running" not in started.text:
        bad.append(f"start: {started.text[:200]!r}")
    if "sleeper" not in listed.text or "sleep 30" not in listed.text:
        bad.append(f"list_processes: {listed.text[:300]!r}")
    if "waiting_input" not in waiting.text or "Name?" not in waiting.text:
        bad.append(f"waiting run: {waiting.text[:300]!r}")
    text = long.text
    if not header(text).startswith("[id:"):
        bad.append(f"long run: no header first: {text[:200]!r}")
    if "\n1\n2\n3\n" not in text:
        bad.append(f"long run: head missing: {text[:300]!r}")
    if "bytes truncated ...]" not in text:
        bad.append(f"long run: our cut marker missing: {text[:200]!r} … {text[-200:]!r}")
    if not text.rstrip().endswith("199999\n200000") and "199999\n200000" not in text[-200:]:
        bad.append(f"long run: tail missing: … {text[-300:]!r}")
    for word in NOT_INLINE:
        if word in text.replace("bytes truncated ...]", ""):
            bad.append(f"long run: the client did not hand it over whole ({word!r}): {text[:200]!r} … {text[-300:]!r}")
    return bad


@pytest.mark.parametrize("key", DRIVERS)
def test_the_model_reads_our_view(key: str, place: Any) -> None:
    d = driver(key)
    require(d)
    world, home, work = place
    run = d.run(world, home, work, script_for(d))
    report(key, d, run)
    bad = problems(run, d)
    # Cline never hands the model a server's instructions (docs/clients.md).
    reads = getattr(d, "reads_instructions", True)
    if reads and not any(INSTRUCTIONS in json.dumps(r["body"]) for r in run.record.requests if r["body"] is not None):
        bad.append("our instructions reached the model in no request")
    assert not run.record.errors, run.record.errors
    assert not bad, "\n".join(bad)


# A command still running at its yield. None of these clients (as driven here: `claude -p`,
# Copilot CLI without --experimental) declares the tasks extension, so each model reads the
# reply with the id and the next call, as before tasks (docs/clients.md, "A long command").
LONG = [Call("run", {"command": "sleep 2; echo done", "yield_ms": 300})]


@pytest.mark.parametrize("key", DRIVERS)
def test_a_long_command_reads_as_before_where_no_task_is_kept(key: str, place: Any) -> None:
    d = driver(key)
    require(d)
    world, home, work = place
    run = d.run(world, home, work, script_for(d, LONG))
    assert not run.record.errors, run.record.errors
    assert run.seen, "no result reached the model"
    text = run.seen[0].text
    assert "state:running" in text and "wait(id=1" in text, text
    assert "task" not in text, text


# A long output with its first error in the middle (a tsc line), which no head or tail reaches:
# whatever the client cuts, the model reads where it is (the header) and the line itself (kept
# between head and tail, docs/tools.md "Error lines").
ERRORS = [
    Call(
        "run",
        {"command": "seq 1 40000; echo 'src/a.ts(3,5): error TS2322: Type string is not assignable'; seq 1 40000"},
    )
]


@pytest.mark.parametrize("key", DRIVERS)
def test_the_first_error_of_a_long_output_reaches_the_model(key: str, place: Any) -> None:
    d = driver(key)
    require(d)
    world, home, work = place
    run = d.run(world, home, work, script_for(d, ERRORS))
    assert not run.record.errors, run.record.errors
    assert run.seen, "no result reached the model"
    text = run.seen[0].text
    assert "errors:1 first:src/a.ts:3:5@" in text, text[:300]
    assert "src/a.ts(3,5): error TS2322" in text, text[:300] + " … " + text[-300:]


# The searches a model makes through Claude Code's ToolSearch (our tools are deferred behind it:
# names only until a search loads them), and the tool each must find among the first three: the
# plain words of a request, beside Claude Code's own tools (Bash, Monitor, TaskStop, …). Our
# tools carry search hints there (`_meta["anthropic/searchHint"]`). Where two of ours answer
# a query, either will do.
SEARCHES: dict[str, Any] = {
    "run shell command": "run",
    "background process": "start",
    "send input": "send_input",
    "kill process": "send_signal",
    "process output": "status",
    "start dev server": "start",
    "wait for process to finish": "wait",
    "stop process": "send_signal",
    "list running processes": "list_processes",
    "type into prompt": "send_input",
    "is it still running": ("status", "list_processes"),
}
TOP = 3


def test_claude_code_tool_search_finds_our_tools_by_keyword(place: Any) -> None:
    d = driver("claude-code")
    require(d)
    world, home, work = place
    run = d.run(world, home, work, [Call("run", {"command": "echo found"})], search=list(SEARCHES))
    found = dict(run.searches)
    missed = {
        q: found.get(q)
        for q, tool in SEARCHES.items()
        if not any(n.endswith(f"__{t}") for n in (found.get(q) or [])[:TOP] for t in ([tool] if isinstance(tool, str) else tool))
    }
    assert not missed, f"searches whose first {TOP} lack our tool: {missed}; all: {found}"
    # Deferred: the first request named our tools without their schemas.
    assert any(n.endswith("__run") for n in run.deferred), run.deferred
    # And the tool found is the one the model then calls.
    assert run.seen and header(run.seen[-1].text).startswith("[id:") and "found" in run.seen[-1].text, run.seen
