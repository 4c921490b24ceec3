"""Fixtures for the Python MCP tests of the real `cuba-exec` binary.

Each test gets a `World`: a short temp dir under /tmp holding the socket (`s`) and state dir
(`state`) of a private `cubad`, which the shim auto-starts from its environment. The fixture's
finalizer SIGKILLs that daemon (pid in `s.lock`) and every process carrying the state dir's
`CUBA_EXEC_PROCESS=<instance>.` marker, then removes the dir.

Every test runs once per protocol generation (`mode`): the legacy initialize handshake and
2026-07-28 (per-request metadata, no handshake).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, AsyncIterator, Iterator

if TYPE_CHECKING:
    from http_server import HttpServer

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ElicitationFnT
from mcp_types import Implementation
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

REPO = Path(__file__).resolve().parents[2]
MODES = ["legacy", "2026-07-28"]
# Seconds one tool call may take before the test fails.
CALL_TIMEOUT = 30.0


def bin_dir() -> Path:
    return Path(os.environ.get("CUBA_EXEC_BIN_DIR") or REPO / "target" / "release")


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat[stat.rfind(")") + 1 :].split()[0]
    return state not in ("Z", "X")


def _kill9(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _environ(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class World:
    """One test's temp dir, environment and clean-up."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.dir = Path(tempfile.mkdtemp(prefix="cm", dir="/tmp"))
        self.socket = self.dir / "s"
        self.state = self.dir / "state"
        daemon = bin_dir() / "cubad"
        shim = bin_dir() / "cuba-exec"
        for exe in (daemon, shim):
            assert exe.is_file(), f"{exe} not found: run `cargo build --workspace --bins` first"
        self.shim = shim
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUBA_EXEC_")}
        env.update(
            CUBA_EXEC_SOCKET=str(self.socket),
            CUBA_EXEC_STATE_DIR=str(self.state),
            CUBA_EXEC_DAEMON=str(daemon),
            CUBA_EXEC_SHUTDOWN_TIMEOUT="500ms",
            CUBA_EXEC_APPROVALS=str(self.dir / "approvals.toml"),
            CUBA_EXEC_TOKENS=str(self.dir / "tokens.toml"),
            CUBA_EXEC_NOTIFY="off",
            CUBA_EXEC_LOG="warn",
        )
        self.env = env

    @asynccontextmanager
    async def client(
        self,
        name: str = "pytest-agent",
        elicitation_callback: ElicitationFnT | None = None,
        **extra_env: str,
    ) -> AsyncIterator[Client]:
        """A connected client of a new shim, named `name`; checks the negotiated version. With an
        `elicitation_callback` it offers elicitation (form and url) and answers with it."""
        params = StdioServerParameters(command=str(self.shim), env=self.env | extra_env)
        client = Client(
            params,
            mode=self.mode,
            client_info=Implementation(name=name, version="0.0.1"),
            read_timeout_seconds=CALL_TIMEOUT,
            elicitation_callback=elicitation_callback,
        )
        async with client:
            if self.mode == "legacy":
                assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS, client.protocol_version
            else:
                assert client.protocol_version == self.mode
            yield client

    def instance(self) -> str | None:
        try:
            return (self.state / "instance").read_text().strip() or None
        except OSError:
            return None

    def marked(self, pid_id: int | None = None) -> list[int]:
        """Live processes started by this world's daemon (of process `pid_id` only, if given)."""
        instance = self.instance()
        if instance is None:
            return []
        prefix = f"CUBA_EXEC_PROCESS={instance}.".encode()
        exact = prefix + str(pid_id).encode() if pid_id is not None else None
        found = []
        for pid in _pids():
            env = _environ(pid)
            if any(kv == exact if exact else kv.startswith(prefix) for kv in env) and _pid_alive(pid):
                found.append(pid)
        return found

    def daemons(self) -> list[int]:
        """Live `cubad` processes serving this world's socket."""
        sock = str(self.socket)
        return [p for p in _pids() if "cubad" in (c := _cmdline(p)) and sock in c and _pid_alive(p)]

    def daemon_pid(self) -> int | None:
        try:
            return int((self.dir / "s.lock").read_text().strip())
        except (OSError, ValueError):
            return None

    def cleanup(self) -> None:
        daemons = self.daemons()
        pid = self.daemon_pid()
        if pid is not None and pid in daemons:
            _kill9(pid)
        for p in daemons:
            _kill9(p)
        # Processes fork while they are killed: repeat until a scan finds none.
        for _ in range(100):
            left = self.marked()
            if not left:
                break
            for p in left:
                _kill9(p)
            time.sleep(0.005)
        instance = self.instance()
        if instance is not None:
            remove_cgroups(instance)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=MODES)
def world(request: pytest.FixtureRequest) -> World:
    w = World(request.param)
    request.addfinalizer(w.cleanup)
    return w


def remove_cgroups(instance: str) -> None:
    """Removes the cgroups a killed daemon of `instance` left: `cuba-exec-<instance>` and every
    cgroup under it (per-agent `agent.NAME` ones and the per-process ones, in them or directly
    under it), killed first and removed deepest first, under this process's cgroup in the v2
    tree and in the v1 pids, memory and cpu hierarchies."""
    own = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            # A v1 hierarchy may hold several controllers (`cpu,cpuacct`); the v2 tree is "".
            for c in controllers.split(","):
                own[c] = path
    with open("/proc/self/mountinfo") as f:
        # Without the newline: the options end the line (`rw,pids`).
        mounts = [line.rstrip("\n").split(" - ") for line in f if " - " in line]

    def below(cgroup: Path) -> list[Path]:
        """The cgroups under `cgroup`, each after the ones under it (deepest first)."""
        found: list[Path] = []
        try:
            children = [c for c in cgroup.iterdir() if c.is_dir()]
        except OSError:
            return found
        for child in children:
            found += below(child)
            found.append(child)
        return found

    for left, right in mounts:
        point = left.split(" ")[4]
        fstype, _, options = (right.split(" ") + ["", "", ""])[:3]
        if fstype == "cgroup2":
            path = own.get("")
        elif fstype == "cgroup":
            path = next((own[c] for c in ("pids", "memory", "cpu") if c in options.split(",") and c in own), None)
        else:
            continue
        if path is None:
            continue
        base = Path(point + path.rstrip("/")) / f"cuba-exec-{instance}"
        if not base.is_dir():
            continue
        # v2 only: in v1 there is no cgroup.kill (the caller killed the marked processes).
        for child in below(base):
            try:
                (child / "cgroup.kill").write_text("1")
            except OSError:
                pass
        for _ in range(50):
            for child in below(base):
                try:
                    child.rmdir()
                except OSError:
                    pass
            try:
                base.rmdir()
                break
            except OSError:
                time.sleep(0.02)


@pytest.fixture
def http(world: World) -> Iterator["HttpServer"]:
    """The world's HTTP endpoint, serving; stopped before the world's clean-up kills its daemon."""
    from http_server import HttpServer  # it imports this module: not at the top

    server = HttpServer(world)
    try:
        server.start()
        yield server
    finally:
        server.stop()
