"""The sandbox people leave on, attacked from inside commands the way an agent would: through MCP
`run` (the official SDK, stdio, both protocol generations) and over HTTP with a narrowed token.
The daemon runs with `sandbox = "workspace-write"` (so the default masks) and `network = "proxy"`
allowing no host. Each attack must fail while the same daemon keeps serving: reading the user's
key and cuba-exec's own state, writing outside the workspace, reaching the daemon's own HTTP
endpoint or any host around or through the proxy, stopping `cubad`, typing into a terminal
multiplexer the person left open. And the person's side: a host no rule names is put to the
person through the MCP client's own form, once, and an "approve always" is remembered.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import World
from http_server import HttpServer
from test_mcp import call, limited, text

pytestmark = pytest.mark.anyio

KEY = "PRIVATE-KEY-MATERIAL"


@pytest.fixture
def home(world: World) -> Iterator[Path]:
    """A home with a key, outside /tmp; the world's daemon sandboxed around its `work` dir."""
    home = Path(tempfile.mkdtemp(prefix="cx-home-", dir="/var/tmp"))
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text(KEY)
    (home / "work").mkdir()
    world.env.update(
        HOME=str(home),
        CUBA_EXEC_SANDBOX="workspace-write",
        CUBA_EXEC_ALLOWED_DIRS=str(home / "work"),
        CUBA_EXEC_NETWORK="proxy",
    )
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def tmux(world: World) -> Iterator[Path]:
    """A tmux server the person left open, on a socket under /tmp (outside the workspace)."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")
    sock = world.dir / "tmux.sock"
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    subprocess.run(["tmux", "-S", str(sock), "new-session", "-d", "-s", "person", "sleep 600"], check=True, env=env)
    yield sock
    subprocess.run(["tmux", "-S", str(sock), "kill-server"], env=env, check=False)


def attack(world: World, home: Path, tmux: Path, endpoint: str | None) -> str:
    """One command that tries each way out and prints what each got."""
    pid = (world.dir / "s.lock").read_text().strip()
    outside = Path("/var/tmp") / f"cx-escaped-{os.getpid()}"
    parts = [
        f"cat {home}/.ssh/id_ed25519 2>&1",
        f"echo journal:$(wc -c < {world.state}/journal.jsonl 2>&1)",
        f"echo x > {outside} 2>&1",
        f"kill -STOP {pid} 2>&1 && echo stopped-daemon",
        f"tmux -S {tmux} send-keys -t person 'touch {world.dir}/typed' Enter 2>&1 && echo typed-keys",
        "curl -sS -m 5 https://example.com/ 2>&1 | head -c 200",
        "bash -c 'exec 3<>/dev/tcp/1.1.1.1/443 && echo direct-out' 2>&1",
    ]
    if endpoint:
        port = endpoint.rsplit(":", 1)[1].split("/")[0]
        parts += [
            f"curl -sS -m 5 --noproxy '*' http://127.0.0.1:{port}/mcp 2>&1 | head -c 200",
            f"curl -sS -m 5 http://127.0.0.1:{port}/mcp 2>&1 | head -c 200",
        ]
    return "cd " + str(home / "work") + " && { " + "; echo; ".join(parts) + "; echo; echo attack-done; }"


def assert_held(said: str, world: World, home: Path) -> None:
    assert "attack-done" in said, said
    assert KEY not in said, said
    assert re.search(r"journal:\s*\d", said) is None, said
    assert "stopped-daemon" not in said and "typed-keys" not in said and "direct-out" not in said, said
    assert not (world.dir / "typed").exists(), "keys reached the person's terminal"
    assert not Path(f"/var/tmp/cx-escaped-{os.getpid()}").exists(), "a write escaped the workspace"
    assert "Permission denied" in said, said


@limited()
async def test_a_command_run_through_mcp_stays_in_the_sandbox(world: World, home: Path, tmux: Path) -> None:
    async with world.client() as c:
        await call(c, "run", command="true", cwd=str(home / "work"))  # the daemon is up: its pid is known
        r = await call(c, "run", command=attack(world, home, tmux, None), timeout_ms=60_000, cwd=str(home / "work"))
        said = text(r)
        assert_held(said, world, home)
        # The daemon still serves, and the workspace still works.
        ok = await call(c, "run", command="echo fine > f && cat f", cwd=str(home / "work"))
        assert "fine" in text(ok), text(ok)


@limited()
async def test_a_narrowed_token_stays_in_the_sandbox(world: World, home: Path, tmux: Path, http: HttpServer) -> None:
    token = http.token("narrow", "--roots", str(home / "work"))
    async with http.client(token) as c:
        await call(c, "run", command="true", cwd=str(home / "work"))  # the daemon is up: its pid is known
        r = await call(c, "run", command=attack(world, home, tmux, http.url), timeout_ms=60_000, cwd=str(home / "work"))
        said = text(r)
        assert_held(said, world, home)
        # Through the proxy the endpoint is a loopback address no rule names: refused.
        assert "refused" in said or "403" in said, said


class Origin:
    """A loopback HTTP server answering `hello from PATH`; stopped by `close`."""

    def __init__(self) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                body = f"hello from {self.path}\n".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def named_daemon(world: World, names: list[str]) -> None:
    """The world's daemon (started by its first client) sees `names` as 127.0.0.1: it runs in a
    mount namespace of its own where /etc/hosts is a file of the test's."""
    hosts = world.dir / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {n}\n" for n in names))
    wrapper = world.dir / "cubad-named"
    real = world.env["CUBA_EXEC_DAEMON"]
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec unshare -m --propagation private sh -c 'mount --bind {hosts} /etc/hosts && exec \"$0\" \"$@\"' {real} \"$@\"\n"
    )
    wrapper.chmod(0o755)
    world.env["CUBA_EXEC_DAEMON"] = str(wrapper)


@limited()
async def test_an_unknown_host_is_asked_through_the_clients_form_and_remembered(world: World) -> None:
    from test_approvals import Person, accept

    origin = Origin()
    named_daemon(world, ["asked.test"])
    world.env.update(CUBA_EXEC_NETWORK="proxy", CUBA_EXEC_PROXY_UNKNOWN="ask")
    person = Person(accept("approve_always"))
    try:
        async with world.client(elicitation_callback=person) as c:
            url = f"http://asked.test:{origin.port}"
            r = await call(c, "run", command=f"curl -sS {url}/one && curl -sS -p {url}/two", cwd=str(world.dir))
            assert "hello from /one" in text(r) and "hello from /two" in text(r), text(r)
            assert len(person.forms) == 1, person.messages()
            message = person.forms[0].message
            assert f"wants to reach asked.test:{origin.port}" in message, message
            assert "needs your approval" in message, message
            # Remembered for the directory: the next command is not asked.
            r = await call(c, "run", command=f"curl -sS {url}/three", cwd=str(world.dir))
            assert "hello from /three" in text(r), text(r)
            assert len(person.forms) == 1, person.messages()
    finally:
        origin.close()
