"""The Windows `cuba-exec.exe` under Wine, through the official Python MCP SDK.

There is no Windows `cubad` yet (README, Windows): what runs here is the Windows MCP server
itself over stdio, its tool list, and its start of `cubad.exe` (detached, no console) whose
refusal reaches the model as a clear UNAVAILABLE naming the reason, in both protocol
generations. `scripts/test` builds the Windows programs first (scripts/windows-test) and points
CUBA_EXEC_WINDOWS_BIN_DIR at them.
"""

from __future__ import annotations

import os
import shutil
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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("mode", MODES)
async def test_the_windows_server_lists_its_tools_and_says_why_no_daemon_runs(mode: str) -> None:
    bin_dir = windows_bin()
    tmp = Path(tempfile.mkdtemp(prefix="cuba-win-", dir="/tmp"))
    try:
        env = dict(os.environ)
        env.update(
            WINEDEBUG="-all",
            WINEPREFIX=os.environ.get("WINEPREFIX", str(Path.home() / ".cache" / "cuba-wine")),
            # A pipe and a state directory of this test's own.
            CUBA_EXEC_SOCKET=f"\\\\.\\pipe\\cuba-exec-test-{uuid.uuid4().hex}",
            CUBA_EXEC_STATE_DIR=wine_path(tmp / "state"),
        )
        env.pop("CUBA_EXEC_DAEMON", None)
        params = StdioServerParameters(
            command=str(WINE), args=[str(bin_dir / "cuba-exec.exe")], env=env
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
                result = await client.call_tool("run", {"command": "echo hi"})
        text = "".join(getattr(c, "text", "") for c in result.content)
        assert result.is_error, text
        assert "UNAVAILABLE" in text, text
        assert "does not run on Windows yet" in text, text
        # The daemon's own words came from its log in the state directory the client made.
        assert (tmp / "state" / "cubad.log").is_file()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
