"""The `ask` decision (approvals) through the official Python MCP SDK as the client, in both
protocol generations (the `world` fixture runs every test twice, see conftest.py).

The shim's environment sets `CUBA_EXEC_ASK_COMMANDS`, so a `run` of a matching command is held
in `awaiting_approval` until a person answers. A client that offers elicitation is asked for
them: on a legacy connection by an `elicitation/create` request during the call, on 2026-07-28
by an `input_required` result the SDK answers by calling again with `inputResponses`. Either
way the SDK hands the form to the client's elicitation callback: here a scripted `Person` that
records every form and answers as the test says.

Covered:

- approve once: the command runs, the reply is the ordinary exit-0 reply, and the next one is
  asked again;
- approve always: the rule is remembered for the command's directory and below (`cubactl
  approvals` lists it), not for another directory nor for another rule;
- deny with a reason: DENIED, the reason in the reply, nothing ran;
- decline and cancel: the reply says the command awaits approval (`cubactl approve`); a person's
  `cubactl approve` lets it run, and `wait` collects it;
- an exec held at run time (a program the parser could not see, `$x`): asked by the same form,
  approved it runs, denied the shell reads EACCES (exit 126);
- a password asked through the askpass helper (by the genuine git, of a stand-in server) is
  never put to the client: the reply names `cubactl answer`, which gives it;
- a client without elicitation: the reply names `cubactl approve`/`deny`; a person's `cubactl
  deny` reaches `wait` as DENIED.

Every call and every `cubactl` run is bounded; nothing sleeps to synchronise (the held state is
the call's reply; `wait` blocks until the process moves on).
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import CALL_TIMEOUT, World, bin_dir
from mcp_types import CallToolResult, ElicitRequestFormParams, ElicitResult
from test_mcp import call, exec_checks, limited, sc, text

pytestmark = pytest.mark.anyio

ASK = "touch *"
DECISIONS = ["approve_once", "approve_always", "deny"]
# Long enough for any of these commands once it may run; bounded by CALL_TIMEOUT too.
WAIT_MS = 15_000


class Person:
    """The user behind the client's elicitation callback: records every form it is shown and
    answers with the next of `answers` (cancel, once they run out: a question nobody expected
    stays unanswered, and the test sees the extra form)."""

    def __init__(self, *answers: ElicitResult) -> None:
        self.answers = list(answers)
        self.forms: list[ElicitRequestFormParams] = []
        self.other: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        if not isinstance(params, ElicitRequestFormParams):
            self.other.append(params)
            return ElicitResult(action="decline")
        self.forms.append(params)
        if not self.answers:
            return ElicitResult(action="cancel")
        return self.answers.pop(0)

    def messages(self) -> list[str]:
        return [f.message for f in self.forms]


def accept(decision: str, reason: str | None = None) -> ElicitResult:
    content: dict[str, Any] = {"decision": decision}
    if reason is not None:
        content["reason"] = reason
    return ElicitResult(action="accept", content=content)


def check_form(form: ElicitRequestFormParams, doing: str, rule: str = ASK) -> None:
    """Our approval form: the question in words (what, which rule), and the decision (one of
    three) with an optional reason."""
    assert "needs your approval" in form.message, form.message
    assert doing in form.message, form.message
    assert f"(ask_commands: {rule})" in form.message, form.message
    schema = form.requested_schema
    assert schema["type"] == "object", schema
    assert schema["properties"]["decision"]["enum"] == DECISIONS, schema
    assert schema["properties"]["reason"]["type"] == "string", schema
    assert schema.get("required") == ["decision"], schema


def header(r: CallToolResult) -> str:
    return text(r).splitlines()[0]


def cubactl(world: World, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`cubactl --socket <world's> ARGS` as the person at the terminal (not in any tree the
    daemon started); fails the test if it does not succeed."""
    out = subprocess.run(
        [str(bin_dir() / "cubactl"), "--socket", str(world.socket), *args],
        env=world.env | {"NO_COLOR": "1"},
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
    )
    assert out.returncode == 0, f"cubactl {' '.join(args)}: {out.returncode}\n{out.stdout}{out.stderr}"
    return out


def approvals(world: World) -> dict[str, Any]:
    return json.loads(cubactl(world, "approvals", "--json").stdout)


def daemon_env(world: World) -> list[bytes]:
    pid = world.daemon_pid()
    assert pid is not None, "no daemon started"
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


async def awaiting(r: CallToolResult) -> int:
    """The id of the process `r` says is held for approval, after checking what the model reads:
    the header, and the hint naming the person's commands."""
    assert not r.is_error, text(r)
    pid_id = sc(r)["id"]
    assert sc(r)["state"] == "awaiting_approval", text(r)
    assert header(r).startswith(f"[id:{pid_id} state:awaiting_approval "), text(r)
    hint = sc(r)["hint"]
    assert f"cubactl approve {pid_id} / cubactl deny {pid_id}" in hint, hint
    assert f"wait(id={pid_id})" in hint and hint in text(r), text(r)
    assert sc(r)["output"] == "", text(r)
    return pid_id


@limited()
async def test_approve_once_runs_it_and_asks_again_next_time(world: World) -> None:
    marker, again = world.dir / "marker", world.dir / "again"
    person = Person(accept("approve_once"), accept("deny"))
    async with world.client(elicitation_callback=person, CUBA_EXEC_ASK_COMMANDS=ASK) as c:
        command = f"touch {marker} && echo made"
        r = await call(c, "run", command=command)
        assert not r.is_error, text(r)
        assert header(r) == f"[id:{sc(r)['id']} exit:0]", text(r)
        assert sc(r)["exit_code"] == 0 and sc(r)["output"] == "made\n", text(r)
        assert "hint" not in sc(r), text(r)
        assert marker.exists()
        assert len(person.forms) == 1, person.messages()
        check_form(person.forms[0], f"it wants to run `{command}`")
        assert f"(process {sc(r)['id']})" in person.forms[0].message
        assert not person.other
        # The first client's environment started the daemon (its own ask rule included).
        assert f"CUBA_EXEC_ASK_COMMANDS={ASK}".encode() in daemon_env(world)

        # Once is once: the next `touch` is asked again (and denied here).
        r = await call(c, "run", command=f"touch {again}")
        assert len(person.forms) == 2, person.messages()
        assert r.is_error and sc(r)["code"] == "DENIED", text(r)
        assert not again.exists()
        assert approvals(world)["remembered"] == []


@limited()
async def test_approve_always_is_remembered_for_its_rule_in_its_directory(world: World) -> None:
    proj, other = world.dir / "proj", world.dir / "other"
    (proj / "sub").mkdir(parents=True)
    other.mkdir()
    person = Person(accept("approve_always"), accept("deny"), accept("deny"))
    rules = "touch *, mkdir -p*"
    async with world.client(elicitation_callback=person, CUBA_EXEC_ASK_COMMANDS=rules) as c:
        r = await call(c, "run", command="touch a && echo one", cwd=str(proj))
        assert not r.is_error and sc(r)["output"] == "one\n", text(r)
        assert len(person.forms) == 1, person.messages()
        check_form(person.forms[0], f"it wants to run `touch a && echo one` in {proj} ", ASK)
        assert (proj / "a").exists()

        # The same rule in the same directory, and below it: not asked again.
        r = await call(c, "run", command="touch b && echo two", cwd=str(proj))
        assert not r.is_error and sc(r)["output"] == "two\n", text(r)
        r = await call(c, "run", command="touch c && echo three", cwd=str(proj / "sub"))
        assert not r.is_error and sc(r)["output"] == "three\n", text(r)
        assert len(person.forms) == 1, person.messages()
        assert (proj / "b").exists() and (proj / "sub" / "c").exists()

        # The daemon remembers it (and says so), for the rule and the command's directory.
        listed = approvals(world)
        assert listed["pending"] == [], listed
        [kept] = listed["remembered"]
        assert kept["rule"] == f"ask_commands: {ASK}" and kept["dir"] == str(proj), kept
        assert "elicitation" in kept["channel"] and "pytest-agent" in kept["channel"], kept
        shown = cubactl(world, "approvals").stdout
        assert f"ask_commands: {ASK}" in shown and str(proj) in shown, shown
        assert "[[approval]]" in Path(listed["file"]).read_text()

        # Another rule in the same directory is asked (denied here) ...
        r = await call(c, "run", command="mkdir -p new", cwd=str(proj))
        assert len(person.forms) == 2, person.messages()
        check_form(person.forms[1], "it wants to run `mkdir -p new`", "mkdir -p*")
        assert r.is_error and sc(r)["code"] == "DENIED", text(r)
        assert not (proj / "new").exists()
        # ... and so is the same rule in another directory.
        r = await call(c, "run", command="touch d", cwd=str(other))
        assert len(person.forms) == 3, person.messages()
        check_form(person.forms[2], f"it wants to run `touch d` in {other} ")
        assert r.is_error and sc(r)["code"] == "DENIED", text(r)
        assert not (other / "d").exists()

    # Remembered by the daemon, not by the client: a client that cannot ask runs it unasked.
    async with world.client("agent-two", CUBA_EXEC_ASK_COMMANDS=rules) as c:
        r = await call(c, "run", command="touch e && echo four", cwd=str(proj))
        assert not r.is_error and sc(r)["output"] == "four\n", text(r)
        assert (proj / "e").exists()


@limited()
async def test_deny_with_a_reason_tells_the_model_and_runs_nothing(world: World) -> None:
    marker = world.dir / "marker"
    person = Person(accept("deny", "not now"))
    async with world.client(elicitation_callback=person, CUBA_EXEC_ASK_COMMANDS=ASK) as c:
        command = f"touch {marker} && echo made"
        r = await call(c, "run", command=command)
        assert len(person.forms) == 1, person.messages()
        check_form(person.forms[0], f"it wants to run `{command}`")
        assert r.is_error, text(r)
        pid_id = sc(r)["id"]
        assert header(r).startswith(f"[id:{pid_id} state:denied error:DENIED"), text(r)
        assert sc(r)["state"] == "denied" and sc(r)["code"] == "DENIED", text(r)
        error = sc(r)["error"]
        assert "did not run" in error and "not now" in error, error
        assert "through elicitation in pytest-agent: not now" in error, error
        assert f"DENIED: {error}" in text(r)
        assert sc(r)["output"] == "" and "made" not in text(r), text(r)
        assert not marker.exists()
        # Settled: nothing waits, nothing is remembered, and the process is gone for good.
        listed = approvals(world)
        assert listed["pending"] == [] and listed["remembered"] == [], listed
        w = await call(c, "wait", id=pid_id, timeout_ms=WAIT_MS)
        assert sc(w)["state"] == "denied", text(w)
        assert len(person.forms) == 1, person.messages()
        assert not marker.exists()


@pytest.mark.parametrize("action", ["decline", "cancel"])
@limited()
async def test_no_answer_in_the_client_leaves_it_to_cubactl_approve(world: World, action: str) -> None:
    marker = world.dir / "marker"
    person = Person(ElicitResult(action=action))
    async with world.client(elicitation_callback=person, CUBA_EXEC_ASK_COMMANDS=ASK) as c:
        command = f"touch {marker} && echo made"
        r = await call(c, "run", command=command)
        assert len(person.forms) == 1, person.messages()
        check_form(person.forms[0], f"it wants to run `{command}`")
        pid_id = await awaiting(r)
        why = {"decline": "the user declined to answer in pytest-agent",
               "cancel": "the question was dismissed in pytest-agent"}[action]
        assert f"({why})" in sc(r)["hint"], text(r)
        assert f"of `{command}` (ask_commands: {ASK})" in sc(r)["hint"], text(r)
        assert not marker.exists()

        [pending] = approvals(world)["pending"]
        assert pending["id"] == pid_id and pending["command"] == command, pending
        assert pending["owner"] == "pytest-agent", pending

        # The person answers in their terminal; the model's `wait` collects the run.
        cubactl(world, "approve", str(pid_id))
        w = await call(c, "wait", id=pid_id, timeout_ms=WAIT_MS)
        assert not w.is_error, text(w)
        assert sc(w)["state"] == "exited" and sc(w)["exit_code"] == 0, text(w)
        assert sc(w)["output"] == "made\n", text(w)
        assert marker.exists()
        assert len(person.forms) == 1, person.messages()
        assert approvals(world)["pending"] == []


def require_exec_checks(world: World) -> None:
    line = exec_checks(world)
    if "exec checks on" not in line:
        why = f"this machine cannot check execs: {line}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.mark.parametrize("decision", ["approve_once", "deny"])
@limited()
async def test_an_exec_held_at_run_time_is_asked_about_too(world: World, decision: str) -> None:
    marker = world.dir / "m"
    person = Person(accept(decision, "no touching" if decision == "deny" else None))
    async with world.client(elicitation_callback=person, CUBA_EXEC_ASK_COMMANDS=ASK) as c:
        r = await call(c, "run", command="true")
        assert not r.is_error, text(r)
        require_exec_checks(world)
        # The parser sees `$x`, not `touch`: allowed at spawn, held at the exec of touch.
        command = f'x=$(printf to; printf uch); $x {marker}; echo "exit $?"'
        r = await call(c, "run", command=command)
        assert len(person.forms) == 1, person.messages()
        check_form(person.forms[0], f"its command `{command}` is about to run `touch {marker}`")
        assert not r.is_error, text(r)
        assert sc(r)["state"] == "exited" and sc(r)["exit_code"] == 0, text(r)
        if decision == "approve_once":
            assert sc(r)["output"] == "exit 0\n", text(r)
            assert "blocked" not in sc(r), text(r)
            assert marker.exists()
        else:
            # Two pipes: dash writes its error in pieces, so the lines may interleave.
            assert "exit 126\n" in sc(r)["output"], text(r)
            assert "Permission denied" in sc(r)["output"], text(r)
            [blocked] = sc(r)["blocked"]
            assert blocked.startswith(f"BLOCKED: touch (`touch {marker}`"), blocked
            assert "rule ask" in blocked and "no touching" in blocked, blocked
            assert blocked in text(r)
            assert not marker.exists()
        assert approvals(world)["pending"] == []


class GitServer:
    """A stand-in git server on 127.0.0.1: a request without credentials gets 401 (Basic), one
    with them is recorded and gets 404, so the genuine git asks for a username and a password
    through the askpass helper, sends them here, and ends."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                auth = self.headers.get("Authorization")
                if auth is None:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="x"')
                else:
                    seen.append(auth)
                    self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/repo"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@limited()
async def test_a_password_is_never_asked_through_the_client(world: World) -> None:
    # Would approve anything it were asked: it must not be asked at all.
    person = Person(accept("approve_once"))
    server = GitServer()
    home = world.dir / "home"
    home.mkdir()
    secret = "pw-9x7"
    try:
        async with world.client(elicitation_callback=person, CUBA_EXEC_ASK_COMMANDS=ASK) as c:
            # The genuine git, away from any credential helper of the machine's or a user's.
            command = (
                f"HOME='{home}' GIT_CONFIG_NOSYSTEM=1 git -c credential.helper= clone "
                f"{server.url} '{world.dir / 'clone'}'; echo \"git $?\""
            )
            r = await call(c, "run", command=command)
            assert person.forms == [] and person.other == [], person.messages()
            assert not r.is_error, text(r)
            pid_id = sc(r)["id"]
            for answer, prompt in (("me", "Username for"), (secret, "Password for")):
                assert sc(r)["state"] == "waiting_input", text(r)
                assert header(r).startswith(f"[id:{pid_id} state:waiting_input "), text(r)
                hint = sc(r)["hint"]
                assert "waiting for the user's password" in hint and prompt in hint, hint
                assert "git-remote-http" in hint, hint
                assert f"`cubactl answer {pid_id}`" in hint, hint
                assert "never send a password yourself" in hint, hint
                [pending] = approvals(world)["pending"]
                assert pending["id"] == pid_id and pending["ask"]["kind"] == "password", pending
                assert pending["ask"]["what"].startswith(prompt), pending
                # The person types it (here: on cubactl's stdin, not a terminal).
                cubactl(world, "answer", str(pid_id), stdin=f"{answer}\n")
                # Returns at the next question, or once git has ended.
                r = await call(c, "wait", id=pid_id, timeout_ms=WAIT_MS)
                assert not r.is_error, text(r)
            assert sc(r)["state"] == "exited" and "git 128" in sc(r)["output"], text(r)
            expected = base64.b64encode(f"me:{secret}".encode()).decode()
            assert server.seen == [f"Basic {expected}"], server.seen
            assert secret not in text(r)
            assert person.forms == [], person.messages()
    finally:
        server.close()


@limited()
async def test_a_client_without_elicitation_leaves_it_to_cubactl(world: World) -> None:
    marker = world.dir / "marker"
    async with world.client(CUBA_EXEC_ASK_COMMANDS=ASK) as c:
        command = f"touch {marker} && echo made"
        r = await call(c, "run", command=command)
        pid_id = await awaiting(r)
        assert "(pytest-agent cannot ask its user (it offers no elicitation))" in sc(r)["hint"], text(r)
        assert not marker.exists()

        cubactl(world, "deny", str(pid_id), "--reason", "x")
        w = await call(c, "wait", id=pid_id, timeout_ms=WAIT_MS)
        assert w.is_error, text(w)
        assert sc(w)["state"] == "denied" and sc(w)["code"] == "DENIED", text(w)
        assert sc(w)["error"].endswith("through cubactl: x); do not look for another way to do "
                                       "it: ask the user what they want instead"), text(w)
        assert "did not run" in sc(w)["error"], text(w)
        assert not marker.exists()
        assert approvals(world)["pending"] == []
