"""The Windows programs under Wine: `cubad.exe`, `cubactl.exe` and `cuba-exec.exe` built for
x86_64-pc-windows-gnu, driven end to end.

Each test gets a pipe and a state directory of its own; the daemon is started by the first
client (detached, no console) and stopped at the end with `cubactl daemon stop --force`. The
commands run are `cuba-test-helper.exe` (tests/helper), not shell tools: Wine has `cmd.exe`
but few programs. `scripts/test` builds the Windows programs first (scripts/windows-test) and
points CUBA_EXEC_WINDOWS_BIN_DIR at them. What passes here is Wine-tested, not Windows-tested.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import anyio
import pytest
from conftest import MODES
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

pytestmark = pytest.mark.anyio

WINE = Path("/usr/lib/wine/wine64")
TOOLS = {"run", "start", "status", "wait", "send_input", "send_signal", "list_processes"}
# Bound of one cubactl call under Wine (a cold Wine start takes seconds).
CALL = 60


def windows_bin() -> Path:
    d = os.environ.get("CUBA_EXEC_WINDOWS_BIN_DIR")
    if not d or not (Path(d) / "cuba-exec.exe").is_file() or not WINE.is_file():
        why = "the Windows build (scripts/windows-test) or Wine is missing"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}: CI must run it")
        pytest.skip(why)
    return Path(d)


def wine_path(p: Path) -> str:
    """A Linux path as Wine's Z: drive shows it."""
    return "Z:" + str(p).replace("/", "\\")


WINESERVER = Path("/usr/lib/wine/wineserver64")


def wine_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        WINEDEBUG="-all",
        WINEPREFIX=os.environ.get("WINEPREFIX", str(Path.home() / ".cache" / "cuba-wine")),
    )
    return env


def start_wine(bin_dir: Path) -> None:
    """One Wine server for the whole module, kept running, with no pipe of ours.

    A server Wine starts on demand exits as soon as its last program does, so between two calls
    one could start while the last server was going down, and the program connected to it would
    die with it. And the first Wine program of a prefix starts the server and its system
    processes (services.exe and the like), which would hold that program's output pipes open for
    as long as they run."""
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = wine_env()
    # A server going down is waited for (bounded), then one is started that stays.
    try:
        subprocess.run([str(WINESERVER), "-w"], env=env, timeout=CALL, check=False, **quiet)
    except subprocess.TimeoutExpired:
        pass
    subprocess.run([str(WINESERVER), "-p"], env=env, timeout=CALL, check=False, **quiet)
    subprocess.run(
        [str(WINE), str(bin_dir / "cuba-test-helper.exe"), "exit", "0"],
        env=env, timeout=CALL, check=False, **quiet,
    )


def stop_wine() -> None:
    """Ends the module's Wine server and every Wine program of the prefix."""
    subprocess.run(
        [str(WINESERVER), "-k"], env=wine_env(), timeout=CALL, check=False,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module", autouse=True)
def wine_server():
    if not WINE.is_file() or not os.environ.get("CUBA_EXEC_WINDOWS_BIN_DIR"):
        yield
        return
    start_wine(Path(os.environ["CUBA_EXEC_WINDOWS_BIN_DIR"]))
    try:
        yield
    finally:
        stop_wine()


class Win:
    """One test's Windows daemon: its pipe, its state directory, and calls to its programs."""

    def __init__(self) -> None:
        self.bin = windows_bin()
        self.tmp = Path(tempfile.mkdtemp(prefix="cuba-win-", dir="/tmp"))
        self.env = wine_env()
        self.env.update(
            CUBA_EXEC_SOCKET=f"\\\\.\\pipe\\cuba-exec-test-{uuid.uuid4().hex}",
            CUBA_EXEC_STATE_DIR=wine_path(self.tmp / "state"),
            # Short: a stop that Wine cannot deliver as a Ctrl-Break ends the job at once anyway.
            CUBA_EXEC_SHUTDOWN_TIMEOUT="2s",
        )
        for k in ("CUBA_EXEC_DAEMON", "CUBA_EXEC_HOST", "CUBA_EXEC_CONFIG"):
            self.env.pop(k, None)
        self.helper = wine_path(self.bin / "cuba-test-helper.exe")

    def run(
        self, exe: str, *args: str, check: bool = False, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        # Stderr through a file: every Wine process keeps its parent's Unix stderr (Wine's own
        # messages go there), so the daemon a call starts would hold a pipe open for ever.
        with tempfile.TemporaryFile(dir=self.tmp) as err:
            p = subprocess.run(
                [str(WINE), str(self.bin / exe), *args],
                env={**self.env, **(env or {})},
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                timeout=CALL,
                stdin=subprocess.DEVNULL,
            )
            err.seek(0)
            p.stderr = err.read().decode(errors="replace")
        if check and p.returncode != 0:
            raise AssertionError(f"{exe} {args}: rc {p.returncode}\n{p.stdout}\n{p.stderr}")
        return p

    def ctl(
        self, *args: str, check: bool = False, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.run("cubactl.exe", *args, check=check, env=env)

    def close(self) -> None:
        try:
            self.ctl("daemon", "stop", "--force")
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture
def win():
    w = Win()
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_daemon_starts_on_demand_captures_output_and_exit_codes_and_is_one_per_user(
    win: Win,
) -> None:
    p = win.ctl("run", "--", win.helper, "exit", "3")
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "exiting with 3" in p.stderr, p.stderr
    p = win.ctl("run", "--", win.helper, "out", "100000", check=True)
    assert len(p.stdout.encode()) == 100000, len(p.stdout)
    # (259, STILL_ACTIVE, as an exit code is the job unit tests': Wine's cmd.exe turns it
    # into 0.)
    status = win.ctl("daemon", "status", check=True).stdout
    assert "running" in status and "Job Object" in status, status
    assert "sandbox is unavailable on Windows" in status, status
    pid = next(line.split()[1] for line in status.splitlines() if line.startswith("pid"))
    # A second daemon for the same user serves nothing: it finds the first and leaves.
    second = win.run(
        "cubad.exe",
        "--socket",
        win.env["CUBA_EXEC_SOCKET"],
        "--state-dir",
        win.env["CUBA_EXEC_STATE_DIR"],
    )
    assert second.returncode == 0, second.stderr
    assert f"already running (pid {pid})" in second.stderr, second.stderr
    again = win.ctl("daemon", "status", check=True).stdout
    assert f"pid        {pid}" in again, again


def test_a_tree_dies_whole_on_kill(win: Win) -> None:
    pids = win.tmp / "pids"
    started = win.ctl("start", "--name", "tree", "--", win.helper, "tree", wine_path(pids))
    assert started.returncode == 0, started.stderr
    waited = win.ctl("wait", "tree", "--until", "^tree ", "--timeout", "30s", check=True)
    assert "tree" in waited.stdout, waited.stdout
    both = pids.read_text().split()
    assert len(both) == 2, both
    assert win.run("cuba-test-helper.exe", "alive", *both).returncode == 0
    killed = win.ctl("kill", "tree", check=True)
    assert "stopped on request" in killed.stdout + killed.stderr, killed
    # Neither the command nor the grandchild it started is left.
    assert win.run("cuba-test-helper.exe", "alive", *both).returncode == 1, both
    info = json.loads(win.ctl("info", "tree", "--json", check=True).stdout)
    assert info["state"] == "killed", info


def test_stdin_reaches_the_command_and_its_close_is_its_end_of_file(win: Win) -> None:
    win.ctl("start", "--name", "echo", "--", win.helper, "echo", check=True)
    win.ctl("send", "echo", "hello", check=True)
    got = win.ctl("wait", "echo", "--until", "got: hello", "--timeout", "30s", check=True)
    assert "got: hello" in got.stdout, got.stdout
    win.ctl("send", "echo", "--eof", check=True)
    ended = win.ctl("wait", "echo", "--timeout", "30s", check=True)
    assert "exited with code 0" in ended.stderr, ended.stderr
    logs = win.ctl("logs", "echo", check=True).stdout
    assert logs.splitlines() == ["got: hello", "eof"], logs


def test_a_terminal_command_runs_on_a_pseudo_console(win: Win) -> None:
    p = win.ctl("run", "--tty", "--name", "t", "--", win.helper, "exit", "3")
    assert p.returncode == 3, (p.stdout, p.stderr)
    info = json.loads(win.ctl("info", "t", "--json", check=True).stdout)
    assert info["tty"] and info["tty"]["cols"] > 0, info
    # Its screen is there to look at, as on Unix.
    win.ctl("screen", "t", check=True)
    # A process on pipes has none.
    win.ctl("run", "--name", "p", "--", win.helper, "exit", "0", check=True)
    p = win.ctl("screen", "p")
    assert p.returncode != 0 and "has no terminal" in p.stderr, p.stderr


def test_a_terminal_process_answers_input(win: Win) -> None:
    win.ctl("start", "--tty", "--name", "e", "--", win.helper, "echo", check=True)
    # Wine 8 makes the pseudo console but attaches no program to it: the program sees no
    # console input (end of file at once) and its output reaches nobody. Depending on how soon
    # it ends, the send finds its input closed, or is taken and never read.
    no_console = "Wine 8 attaches no program to a pseudo console: a test for Windows"
    p = win.ctl("send", "e", "hello")
    if p.returncode != 0 and "stdin is closed" in p.stderr:
        pytest.skip(no_console)
    got = win.ctl("wait", "e", "--until", "got: hello", "--timeout", "30s")
    if got.returncode != 0 and "without matching" in got.stderr:
        # Only that: a program that ended having shown nothing at all.
        if not win.ctl("logs", "e", check=True).stdout.strip():
            pytest.skip(no_console)
    assert got.returncode == 0, f"{got.stdout}\n{got.stderr}"
    assert "got: hello" in got.stdout, got.stdout
    win.ctl("send", "e", "--eof", check=True)
    win.ctl("wait", "e", "--timeout", "30s", check=True)
    screen = win.ctl("screen", "e", check=True).stdout
    assert "got: hello" in screen and "eof" in screen, screen


def test_what_windows_lacks_is_refused_with_its_reason(win: Win) -> None:
    win.ctl("start", "--name", "s", "--", win.helper, "sleep", "60", check=True)
    p = win.ctl("kill", "--signal", "USR1", "s")
    assert p.returncode != 0 and "no meaning on Windows" in p.stderr, p.stderr
    win.ctl("kill", "--signal", "KILL", "s", check=True)
    # A sandbox asked for is refused, not ignored: Windows has none yet.
    p = win.ctl("run", "--", win.helper, "exit", "0", env={"CUBA_EXEC_SANDBOX": "workspace-write"})
    assert p.returncode != 0 and "sandbox is unavailable on Windows" in p.stderr, p.stderr
    # The policy cannot read cmd text: with `unresolved = "refuse"` it is not run.
    p = win.ctl("run", "echo hi", env={"CUBA_EXEC_UNRESOLVED": "refuse"})
    assert p.returncode != 0 and "cannot be checked" in p.stderr, p.stderr
    assert "hi" not in p.stdout, p.stdout
    # What the OS cannot do is its own kind, naming the feature and the OS.
    p = win.ctl("run", "--session", "dev", "--", win.helper, "exit", "0")
    assert p.returncode != 0 and "UNSUPPORTED" in p.stderr and "cubad on Windows does not offer shell sessions" in p.stderr, p.stderr


def test_daemon_stop_stops_it(win: Win) -> None:
    win.ctl("run", "--", win.helper, "exit", "0", check=True)
    stopped = win.ctl("daemon", "stop", check=True)
    assert "stopped cubad" in stopped.stdout, stopped.stdout
    after = win.ctl("daemon", "status")
    assert after.returncode != 0 and "not running" in after.stdout + after.stderr, after


@pytest.mark.parametrize("mode", MODES)
async def test_the_python_sdk_runs_a_command_through_the_windows_server(mode: str) -> None:
    w = Win()
    try:
        params = StdioServerParameters(
            command=str(WINE), args=[str(w.bin / "cuba-exec.exe")], env=w.env
        )
        client = Client(
            params,
            mode=mode,
            client_info=Implementation(name="pytest-wine", version="0.0.1"),
            read_timeout_seconds=60.0,
        )
        with anyio.fail_after(120):
            async with client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert tools == TOOLS, tools
                result = await client.call_tool("run", {"command": "echo hi from cmd"})
                text = "".join(getattr(c, "text", "") for c in result.content)
                assert not result.is_error, text
                assert "hi from cmd" in text, text
                failed = await client.call_tool(
                    "run", {"command": f'"{w.helper}" exit 4'}
                )
                text = "".join(getattr(c, "text", "") for c in failed.content)
                assert "exiting with 4" in text and "4" in text, text
        # The daemon the server started serves on for cubactl.
        listed = w.ctl("ps", check=True).stdout
        assert "echo hi from cmd" in listed, listed
    finally:
        w.close()


async def test_a_command_cannot_reach_past_its_owners_policy_through_cubactl() -> None:
    """The trust check on Windows, attacked from inside a command's tree: a client confined to
    one directory (`CUBA_EXEC_ALLOWED_DIRS`) runs a command through MCP that drops that setting
    from its environment and uses `cubactl.exe` to run elsewhere, to stop a command it did not
    start, and to stop the daemon. The daemon tells it by its Job Object (the tree's job, which
    nothing in it can leave), not by anything the command says, and holds it to its owner's
    policy; the same requests from outside the tree are the outsider's, and succeed."""
    w = Win()
    try:
        box, elsewhere = w.tmp / "box", w.tmp / "elsewhere"
        box.mkdir()
        elsewhere.mkdir()
        # The outsider's command: not the confined client's to see or stop.
        w.ctl("start", "--name", "victim", "--", w.helper, "sleep", "120", check=True)
        pid = json.loads(w.ctl("daemon", "status", "--json", check=True).stdout)["pid"]
        ctl = f'"{wine_path(w.bin / "cubactl.exe")}"'
        # One stream (`2>&1`): what each step says comes after its marker.
        attack = " & ".join(
            [
                # What the command's own cubactl would carry, dropped: only its tree tells now.
                'set "CUBA_EXEC_ALLOWED_DIRS="',
                "echo ==run",
                f'{ctl} run --cwd "{wine_path(elsewhere)}" -- "{w.helper}" exit 0 2>&1',
                "echo ==kill",
                f"{ctl} kill victim 2>&1",
                "echo ==stop",
                f"{ctl} daemon stop 2>&1",
                "echo ==done",
            ]
        )
        params = StdioServerParameters(
            command=str(WINE),
            args=[str(w.bin / "cuba-exec.exe")],
            env={**w.env, "CUBA_EXEC_ALLOWED_DIRS": wine_path(box)},
        )
        client = Client(
            params,
            mode=MODES[-1],
            client_info=Implementation(name="pytest-wine-confined", version="0.0.1"),
            read_timeout_seconds=120.0,
        )
        with anyio.fail_after(240):
            async with client:
                result = await client.call_tool(
                    "run", {"command": attack, "cwd": wine_path(box), "yield_ms": 100000}
                )
        said = "".join(getattr(c, "text", "") for c in result.content)
        assert "==done" in said, said
        parts = {p.split("\n", 1)[0].strip(): p for p in said.split("==")[1:]}
        # Refused by the owner's rule, not by anything the command itself still carried.
        assert "owner of process" in parts["run"] and "allowed_dirs" in parts["run"], said
        assert "exiting with 0" not in parts["run"], said
        assert "victim" in parts["kill"] and "stopped on request" not in parts["kill"], said
        assert "only a person can stop the daemon" in parts["stop"], said
        # Nothing of it happened: the daemon serves on, the outsider's command runs on.
        status = json.loads(w.ctl("daemon", "status", "--json", check=True).stdout)
        assert status["pid"] == pid, status
        info = json.loads(w.ctl("info", "victim", "--json", check=True).stdout)
        assert info["state"] == "running", info
        # The same requests from outside every tree are the outsider's.
        ran = w.ctl("run", "--cwd", wine_path(elsewhere), "--", w.helper, "exit", "0")
        assert ran.returncode == 0 and "exiting with 0" in ran.stderr, (ran.stdout, ran.stderr)
        killed = w.ctl("kill", "victim", check=True)
        assert "stopped on request" in killed.stdout + killed.stderr, killed
        stopped = w.ctl("daemon", "stop", check=True)
        assert "stopped cubad" in stopped.stdout, stopped.stdout
    finally:
        w.close()


def test_ask_rules_and_the_remembered_approvals(win: Win) -> None:
    """Approvals on Windows: cmd text is not parsed, so a command an `ask` rule could name is
    refused before it runs rather than held or run unasked; the remembered approvals answer as
    on Unix (none yet; a number none has is the caller's mistake, not the daemon's)."""
    asked = {"CUBA_EXEC_ASK_COMMANDS": "echo"}
    p = win.ctl("run", "echo should-not-run", env=asked)
    assert p.returncode != 0 and "cannot be checked" in p.stderr, p.stderr
    assert "should-not-run" not in p.stdout, p.stdout
    listed = win.ctl("approvals", check=True)
    assert "should-not-run" not in listed.stdout, listed.stdout
    forget = win.ctl("approvals", "forget", "3")
    assert forget.returncode != 0, forget
    assert "there is no remembered approval 3" in forget.stderr, forget.stderr
    assert "BAD_REQUEST" in forget.stderr or "bad request" in forget.stderr.lower(), forget.stderr
