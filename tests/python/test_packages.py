"""The packages people install without a Rust toolchain (scripts/package), each installed from
its local file into a clean directory, as a person would: `pip install` into a new venv, `uvx
--from`, `npm install` (run with `npx`) and `npm install -g`. For each: `cuba-exec --version`,
`cubactl setup --dry-run` naming the installed server, the manual pages and completions where
that package manager puts them, and one MCP `run` through the installed server, which must start
the `cubad` installed beside it (no CUBA_EXEC_DAEMON)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import anyio
import pytest
from conftest import CALL_TIMEOUT, REPO, World, bin_dir
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

PROGRAMS = ["cuba-exec", "cubad", "cubactl", "cuba-askpass"]
# Bound for one install or one program run; an install from a local file takes seconds.
STEP_TIMEOUT = 180


def version() -> str:
    m = re.search(r'^version\s*=\s*"([^"]+)"', (REPO / "Cargo.toml").read_text(), re.M)
    assert m
    return m.group(1)


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("packages")
    subprocess.run(
        [str(REPO / "scripts" / "package"), "--out", str(out), "--bin-dir", str(bin_dir())],
        check=True,
        timeout=STEP_TIMEOUT,
    )
    return out


def one(packages: Path, pattern: str) -> Path:
    found = sorted(packages.glob(pattern))
    assert len(found) == 1, f"{pattern}: {found}"
    return found[0]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=STEP_TIMEOUT, **kw)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def clean_env(home: Path) -> dict[str, str]:
    """This environment without our settings, with a HOME of the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUBA_EXEC_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), CODEX_HOME=str(home / ".codex"))
    return env


def check_programs(launch: list[str], cubactl: list[str], server: str, home: Path) -> None:
    """`cuba-exec --version` and `cubactl setup --dry-run` through the installed launchers."""
    home.mkdir(exist_ok=True)
    env = clean_env(home)
    out = run([*launch, "--version"], env=env).stdout
    assert version() in out, out
    dry = run([*cubactl, "setup", "--dry-run", "--client", "claude-code"], env=env)
    assert "would write" in dry.stdout, dry.stdout
    assert f'"command": "{server}"' in dry.stdout, dry.stdout
    # (npx keeps its logs in HOME; the client's file is what a dry run must not write.)
    assert not (home / ".claude.json").exists(), "a dry run wrote the client's file"


def check_share(share: Path) -> None:
    assert (share / "man" / "man1" / "cubactl.1").is_file()
    assert (share / "man" / "man1" / "cubactl-ps.1").is_file()
    assert "complete" in (share / "bash-completion" / "completions" / "cubactl").read_text()
    assert (share / "zsh" / "site-functions" / "_cubactl").read_text().startswith("#compdef cubactl")
    assert (share / "fish" / "vendor_completions.d" / "cubactl.fish").is_file()


async def mcp_run(command: list[str], installed_daemon: Path, extra_env: dict[str, str] | None = None) -> None:
    """One `run` through the server that `command` starts, in a world of its own; the daemon it
    starts must be the installed one."""
    world = World("legacy")
    try:
        env = {k: v for k, v in world.env.items() if k != "CUBA_EXEC_DAEMON"} | (extra_env or {})
        params = StdioServerParameters(command=command[0], args=command[1:], env=env)
        client = Client(
            params,
            mode="legacy",
            client_info=Implementation(name="package-test", version="0.0.1"),
            read_timeout_seconds=CALL_TIMEOUT,
        )
        with anyio.fail_after(CALL_TIMEOUT * 2):
            async with client:
                r = await client.call_tool("run", {"command": "echo packaged-$((6 * 7))"})
        text = r.content[0].text  # type: ignore[union-attr]
        assert "packaged-42" in text, text
        pid = world.daemon_pid()
        assert pid is not None, "no daemon started"
        assert Path(f"/proc/{pid}/exe").resolve() == installed_daemon.resolve()
    finally:
        world.cleanup()


def test_the_archives_hold_the_programs_and_nothing_of_the_build(packages: Path) -> None:
    ver = version()
    whl = one(packages, f"cuba_exec-{ver}-py3-none-manylinux_*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        for p in PROGRAMS:
            info = z.getinfo(f"cuba_exec-{ver}.data/scripts/{p}")
            assert (info.external_attr >> 16) & 0o111, f"{p} is not executable in the wheel"
        assert f"cuba_exec-{ver}.dist-info/RECORD" in names
    assert not [n for n in names if n.endswith(".dwp") or n.endswith(".d")], names
    with tarfile.open(one(packages, f"cuba-exec-{ver}.tgz")) as t:
        pkg = json.loads(t.extractfile("package/package.json").read())  # type: ignore[union-attr]
    assert set(pkg["bin"]) == {"cuba-exec", "cubad", "cubactl"}
    assert list(pkg["optionalDependencies"].values()) == [ver]
    with tarfile.open(one(packages, f"cuba-exec-linux-*-{ver}.tgz")) as t:
        modes = {m.name: m.mode for m in t.getmembers()}
    for p in PROGRAMS:
        assert modes[f"package/bin/{p}"] & 0o111, p
    # The debug info is shipped apart, and every artefact is summed.
    dbg = one(packages, f"cuba-exec-{ver}-*-debug.tar.gz")
    with tarfile.open(dbg) as t:
        assert "cubad.dwp" in t.getnames()
    sums = (packages / "SHA256SUMS").read_text()
    for f in packages.iterdir():
        if f.name != "SHA256SUMS":
            assert f.name in sums, f.name


def test_the_same_programs_give_the_same_archives(packages: Path, tmp_path: Path) -> None:
    subprocess.run(
        [str(REPO / "scripts" / "package"), "--out", str(tmp_path), "--bin-dir", str(bin_dir())],
        check=True,
        capture_output=True,
        timeout=STEP_TIMEOUT,
    )
    assert (tmp_path / "SHA256SUMS").read_text() == (packages / "SHA256SUMS").read_text()


@pytest.mark.anyio
async def test_pip_install_into_a_clean_venv(packages: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    whl = one(packages, "*.whl")
    run([str(venv / "bin" / "pip"), "install", "--no-index", "--disable-pip-version-check", str(whl)])
    bin_ = venv / "bin"
    for p in PROGRAMS:
        assert os.access(bin_ / p, os.X_OK), p
    check_share(venv / "share")
    check_programs([str(bin_ / "cuba-exec")], [str(bin_ / "cubactl")], str(bin_ / "cuba-exec"), tmp_path / "home")
    await mcp_run([str(bin_ / "cuba-exec")], bin_ / "cubad")


@pytest.mark.anyio
async def test_uvx_from_the_wheel(packages: Path, tmp_path: Path) -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv, "uv is not installed in this venv (tests/python/requirements.txt)"
    whl = one(packages, "*.whl")
    # uv's own cache and tool directories, and no index: only the local wheel.
    env = clean_env(tmp_path / "home") | {
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_TOOL_DIR": str(tmp_path / "uv-tools"),
        "UV_OFFLINE": "1",
        "UV_PYTHON": sys.executable,
        "UV_NO_CONFIG": "1",
    }
    (tmp_path / "home").mkdir()
    uvx = [uv, "tool", "run", "--from", str(whl)]
    out = run([*uvx, "cuba-exec", "--version"], env=env).stdout
    assert version() in out, out
    dry = run([*uvx, "cubactl", "setup", "--dry-run", "--client", "claude-code"], env=env).stdout
    assert "would write" in dry, dry
    # The server uvx unpacked: the daemon it starts is the one beside it, in uv's cache.
    where = run([*uvx, "python", "-c", "import shutil; print(shutil.which('cubad'))"], env=env)
    cubad = Path(where.stdout.strip())
    assert cubad.is_file() and str(cubad).startswith(str(tmp_path / "uv-cache")), where.stdout
    await mcp_run([*uvx, "cuba-exec"], cubad, extra_env={k: env[k] for k in env if k.startswith("UV_")})


def npm_install(packages: Path, prefix: Path, *flags: str) -> None:
    npm = shutil.which("npm")
    assert npm, "npm is not installed"
    tgzs = [str(p) for p in sorted(packages.glob("*.tgz"))]
    # --offline: every package comes from the local files; the registry is never asked.
    run([npm, "install", "--offline", "--no-audit", "--no-fund", "--prefix", str(prefix), *flags, *tgzs],
        env=clean_env(prefix.parent / "npm-home") | {"npm_config_cache": str(prefix.parent / "npm-cache")})


@pytest.mark.anyio
async def test_npm_install_and_npx(packages: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "npm-home").mkdir()
    npm_install(packages, project)
    plat = next((project / "node_modules" / "@cuba-exec").iterdir())
    for p in PROGRAMS:
        assert os.access(plat / "bin" / p, os.X_OK), p
    check_share(plat / "share")
    npx = shutil.which("npx")
    assert npx
    # npx runs the launcher, which runs the platform package's binary: setup names that binary.
    check_programs(
        [npx, "--offline", "--prefix", str(project), "cuba-exec"],
        [npx, "--offline", "--prefix", str(project), "cubactl"],
        str((plat / "bin" / "cuba-exec").resolve()),
        tmp_path / "home",
    )
    await mcp_run([str(project / "node_modules" / ".bin" / "cuba-exec")], plat / "bin" / "cubad")


def test_npm_global_install_links_the_programs_and_pages(packages: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "global"
    (tmp_path / "npm-home").mkdir()
    npm_install(packages, prefix, "--global")
    for p in ["cuba-exec", "cubad", "cubactl"]:
        assert os.access(prefix / "bin" / p, os.X_OK), p
    assert (prefix / "share" / "man" / "man1" / "cubactl.1").exists()
    out = run([str(prefix / "bin" / "cubactl"), "--version"], env=clean_env(tmp_path)).stdout
    assert version() in out, out


def test_a_launcher_passes_on_the_exit_status_and_a_signal(packages: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "npm-home").mkdir()
    npm_install(packages, project)
    launcher = project / "node_modules" / ".bin" / "cubactl"
    bad = subprocess.run([str(launcher), "no-such-command"], capture_output=True, text=True, timeout=STEP_TIMEOUT)
    assert bad.returncode == 2, (bad.returncode, bad.stderr)
    assert "no-such-command" in bad.stderr

    # An editor stopping the server signals the launcher: the program itself must stop too.
    world = World("legacy")
    try:
        server = subprocess.Popen(
            [str(project / "node_modules" / ".bin" / "cuba-exec")],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env={k: v for k, v in world.env.items() if k != "CUBA_EXEC_DAEMON"},
        )
        try:
            child = wait_for_child(server.pid)
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=STEP_TIMEOUT) == -signal.SIGTERM
            deadline = time.monotonic() + 10
            while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not Path(f"/proc/{child}").exists(), "cuba-exec outlived its launcher"
        finally:
            server.kill()
            server.wait()
    finally:
        world.cleanup()


def wait_for_child(pid: int) -> int:
    """The first child of `pid` once it has exec'd the program (bounded)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for c in (task / "children").read_text().split():
                if Path(f"/proc/{c}/exe").resolve().name == "cuba-exec":
                    return int(c)
        time.sleep(0.01)
    raise AssertionError(f"{pid} started no cuba-exec")
