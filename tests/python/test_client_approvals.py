"""A person approves (or denies) a command through the real Claude Code: the `ask` decision end
to end.

Our server's entry sets `CUBA_EXEC_ASK_COMMANDS="touch *"`, so the scripted `run` of
`touch <project>/marker && echo made` waits in `awaiting_approval` until someone answers. The
server asks through the MCP client by elicitation: on a 2026-07-28 connection (Claude Code's
default) as an `input_required` result that Claude answers by retrying the call with
`inputResponses`; on a 2025 connection (forced here by `legacy_proxy.py`, which refuses
`server/discover`) as an `elicitation/create` request during the call.

`claude -p` has no one to ask; an `Elicitation` hook in the settings (`approval_hook.py`) answers
for the person, as the test chooses, and records the form it was shown. Each case checks:

- what the command did (the marker file) and what the model read afterwards (our reply, or our
  DENIED line with the person's reason);
- that the hook was asked once, with our form (the message and the decision/reason schema);
- that the form's message reached the model in no request: only the tool result does.

One more case runs without a hook, Claude's own headless answer (`cancel`): nothing runs and
the model reads that the command awaits the person's answer (cubactl approve / deny).

On 2026-07-28 Claude drops a standalone `elicitation/create` unanswered, so a hook asked there
was asked through `input_required`; the 2025 case checks its `elicitation/create` on the wire.

Each case runs in its own temp HOME and project with a private daemon (conftest.World). A client
that is not installed is a skip, and a failure under CI (test_clients.require).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import client_claude
import pytest
from clients_harness import SERVER, Call
from conftest import World
from test_clients import header, require

HERE = Path(__file__).resolve().parent
HOOK = HERE / "approval_hook.py"
PROXY = HERE / "legacy_proxy.py"
ASK = "touch *"
# A distinctive part of our form's message: it must reach the person (the hook), never the model.
FORM = "needs your approval"


@pytest.fixture
def place() -> Any:
    world = World("legacy")
    home = Path(tempfile.mkdtemp(prefix="ca", dir="/tmp"))
    work = home / "project"
    work.mkdir()
    yield world, home, work
    world.cleanup()
    shutil.rmtree(home, ignore_errors=True)


def server_env(home: Path) -> dict[str, str]:
    """Our entry's extra environment: ask before `touch`, remembered approvals kept in the test's
    HOME, no desktop notification."""
    return {
        "CUBA_EXEC_ASK_COMMANDS": ASK,
        "CUBA_EXEC_APPROVALS": str(home / "approvals.toml"),
        "CUBA_EXEC_NOTIFY": "off",
    }


def add_hook(home: Path) -> None:
    """The person's stand-in: an `Elicitation` hook for our server in `~/.claude/settings.json`
    (the driver adds its permission to this file and keeps the rest)."""
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text()) if path.exists() else {}
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(HOOK))}"
    settings.setdefault("hooks", {})["Elicitation"] = [{"matcher": SERVER, "hooks": [{"type": "command", "command": command}]}]
    path.write_text(json.dumps(settings, indent=2) + "\n")


def through_legacy_proxy(env: dict[str, str], log: Path) -> Any:
    """A `configure` for the driver: our entry as `cubactl setup` writes it, its command then
    wrapped in legacy_proxy.py (logging to `log`)."""

    def configure(world: World, home: Path) -> None:
        client_claude.cubactl_setup(world, home, client_claude.NAME, *client_claude.env_flags(env))
        path = home / ".claude.json"
        config = json.loads(path.read_text())
        entry = config["mcpServers"][SERVER]
        entry["args"] = [str(PROXY), str(log), "--", entry["command"], *entry.get("args", [])]
        entry["command"] = sys.executable
        path.write_text(json.dumps(config, indent=2) + "\n")

    return configure


def read_lines(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def approve_run(place: Any, decision: Optional[str], reason: Optional[str] = None, legacy: bool = False) -> tuple[Any, Path, list[Any], Optional[Path]]:
    """One scripted `run` of `touch <project>/marker && echo made`, answered by the hook with
    `decision` (and `reason`); no hook at all if `decision` is None. Returns the run, the
    marker's path, what the hook was asked, and the proxy's log (legacy only)."""
    world, home, work = place
    hook_log = home / "hook.jsonl"
    wire = home / "wire.jsonl" if legacy else None
    env = server_env(home)
    hook_env = {"APPROVAL_HOOK_LOG": str(hook_log), "APPROVAL_HOOK_DECISION": decision or "cancel"}
    if reason is not None:
        hook_env["APPROVAL_HOOK_REASON"] = reason
    if wire is not None:
        d = client_claude.Driver(configure=through_legacy_proxy(env, wire), extra_env=hook_env)
    else:
        d = client_claude.Driver(server_env=env, extra_env=hook_env)
    require(d)
    if decision is not None:
        add_hook(home)
    marker = work / "marker"
    run = d.run(world, home, work, [Call("run", {"command": f"touch {marker} && echo made"})])
    assert not run.record.errors, run.record.errors
    assert run.seen, f"no result reached the model; rc {run.returncode}; stderr: {run.stderr[-2000:]}; stdout: {run.stdout[-2000:]}"
    return run, marker, read_lines(hook_log), wire


def check_not_leaked(run: Any) -> None:
    """The form's message reached the model in no request."""
    leaked = [i for i, r in enumerate(run.record.requests) if r["body"] is not None and FORM in json.dumps(r["body"])]
    assert not leaked, f"the form's message reached the model in requests {leaked} of {len(run.record.requests)}"


def check_asked(run: Any, asked: list[Any], marker: Path) -> None:
    """The hook (the person) was asked once, with our form; the model never saw the form."""
    assert len(asked) == 1, f"the hook was asked {len(asked)} times: {asked}"
    q = asked[0]
    assert q.get("hook_event_name") == "Elicitation" and q.get("mcp_server_name") == SERVER, q
    message = q.get("message", "")
    assert message.startswith(f"The agent ({client_claude.CLIENT_INFO}) {FORM}: it wants to run `touch {marker}"), message
    assert f"(ask_commands: {ASK})" in message and "Approve it?" in message, message
    schema = q.get("requested_schema") or {}
    props = schema.get("properties") or {}
    assert schema.get("type") == "object", schema
    assert props.get("decision", {}).get("enum") == ["approve_once", "approve_always", "deny"], schema
    assert props.get("reason", {}).get("type") == "string", schema
    assert schema.get("required") == ["decision"], schema
    check_not_leaked(run)


def check_approved(run: Any, marker: Path) -> None:
    text = run.seen[-1].text
    assert marker.exists(), f"approved, but the command did not run; the model read: {text!r}"
    first = header(text)
    assert first.startswith("[id:") and " exit:0" in first, f"no `exit:0` header: {text!r}"
    assert "made" in text, text


def test_claude_code_approve_once(place: Any) -> None:
    run, marker, asked, _ = approve_run(place, "approve_once")
    check_approved(run, marker)
    check_asked(run, asked, marker)


def test_claude_code_deny_with_reason(place: Any) -> None:
    run, marker, asked, _ = approve_run(place, "deny", reason="not now")
    text = run.seen[-1].text
    assert not marker.exists(), f"denied, but the command ran; the model read: {text!r}"
    assert "DENIED" in text and "did not run" in text and "not now" in text, text
    assert "exit:0" not in header(text), text
    check_asked(run, asked, marker)


def test_claude_code_approve_once_2025_era(place: Any) -> None:
    run, marker, asked, wire = approve_run(place, "approve_once", legacy=True)
    assert wire is not None
    log = read_lines(wire)
    methods = [(e["dir"], e["msg"].get("method")) for e in log if isinstance(e["msg"], dict) and e["msg"].get("method")]
    # Claude tried 2026-07-28, was refused, and fell back to the handshake.
    assert ("C>S", "server/discover") in methods and ("C>S", "initialize") in methods, methods
    # The server asked during the call with a standalone request, and Claude answered it.
    asks = [e["msg"] for e in log if e["dir"] == "S>C" and isinstance(e["msg"], dict) and e["msg"].get("method") == "elicitation/create"]
    assert len(asks) == 1, f"elicitation/create requests: {asks}; methods: {methods}"
    assert FORM in asks[0]["params"]["message"], asks[0]
    answers = [e["msg"] for e in log if e["dir"] == "C>S" and isinstance(e["msg"], dict) and "method" not in e["msg"] and e["msg"].get("id") == asks[0]["id"]]
    assert answers and answers[0].get("result", {}).get("action") == "accept", answers
    assert answers[0]["result"].get("content", {}).get("decision") == "approve_once", answers
    # No 2026-07-28 form of the question on this connection.
    assert not any("input_required" in json.dumps(e["msg"]) for e in log if e["dir"] == "S>C"), "input_required on a 2025 connection"
    check_approved(run, marker)
    check_asked(run, asked, marker)


def test_claude_code_without_a_hook_leaves_it_awaiting(place: Any) -> None:
    """`claude -p` with no hook answers `cancel`: nothing runs, and the model reads that the
    command waits for the person's answer elsewhere (cubactl approve/deny)."""
    run, marker, asked, _ = approve_run(place, None)
    text = run.seen[-1].text
    assert not marker.exists(), f"dismissed, but the command ran; the model read: {text!r}"
    first = header(text)
    assert first.startswith("[id:") and "state:awaiting_approval" in first, text
    assert "cubactl approve" in text and "dismissed in claude-code" in text, text
    assert not asked, asked
    check_not_leaked(run)
