"""What the sandbox costs, measured (docs/measurements.md, "The sandbox"):

1. A download through the daemon's proxy against the same download straight, on loopback: a
   file served by a local HTTP server, fetched by curl in a command of a daemon with
   `network = "proxy"` (the name allowed by a rule, resolved from a hosts file of the daemon's
   own mount namespace) and of a daemon without a sandbox.
2. The masks on a file-heavy command: `grep -r` over a tree of many files, under
   `sandbox = "workspace-write"` (the default masks) against no sandbox; and the cost of the
   masks at each start (`true` run again and again).

Root only (a mount namespace for the hosts file). Usage:
    python3 tests/python/measure_sandbox.py [--bin-dir target/release] [--size-mb 512] [--files 40000]
"""

from __future__ import annotations

import argparse
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class Daemon:
    """A cubad of its own (socket, state, settings), in a mount namespace where /etc/hosts is
    `hosts`; stopped by `close`."""

    def __init__(self, bins: Path, env: dict[str, str], hosts: Path, home: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cxm", dir="/tmp"))
        os.chmod(self.dir, 0o700)
        self.bins = bins
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CUBA_EXEC_")}
        self.env.update(env, HOME=str(home), CUBA_EXEC_SOCKET=str(self.dir / "s"), CUBA_EXEC_CONFIG="/dev/null")
        inner = f"mount --bind {hosts} /etc/hosts && exec {bins / 'cubad'} --socket {self.dir / 's'} --state-dir {self.dir / 'state'}"
        self.proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", inner], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while self.ctl("daemon", "status").returncode != 0:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("cubad did not start")
            time.sleep(0.05)

    def ctl(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bins / "cubactl"), *args], env=self.env, capture_output=True, text=True, cwd=cwd)

    def run(self, command: str, cwd: Path) -> str:
        r = self.ctl("run", command, cwd=cwd)
        if r.returncode != 0:
            raise SystemExit(f"{command!r} failed: {r.stdout}{r.stderr}")
        return r.stdout

    def close(self) -> None:
        self.ctl("daemon", "stop", "--force")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(directory), **k)  # noqa: E731
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def speeds(d: Daemon, url: str, cwd: Path, n: int, tunnel: bool = False) -> list[float]:
    """MB/s of `n` downloads of `url` by curl in a command of `d` (through whatever proxy its
    sandbox sets; with `tunnel`, through a CONNECT tunnel rather than a plain request)."""
    out = []
    p = "-p " if tunnel else ""
    for _ in range(n):
        said = d.run(f"curl -sS {p}-o /dev/null -w '%{{speed_download}}' {url}", cwd)
        out.append(float(said.strip().split()[-1]) / 1e6)
    return out


def timed(d: Daemon, command: str, cwd: Path, n: int) -> list[float]:
    """Seconds of `command` inside a command of `d`, measured in the command itself (so the
    daemon's start and reply are left out)."""
    out = []
    for _ in range(n):
        said = d.run(f"s=$(date +%s.%N); {command} >/dev/null 2>&1; e=$(date +%s.%N); echo \"$s $e\"", cwd)
        s, e = said.strip().split()[-2:]
        out.append(float(e) - float(s))
    return out


def starts(d: Daemon, cwd: Path, n: int) -> list[float]:
    """Milliseconds per `cubactl run true`, start to reply."""
    out = []
    for _ in range(n):
        t = time.monotonic()
        d.run("true", cwd)
        out.append((time.monotonic() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default=str(REPO / "target" / "release"))
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--files", type=int, default=40000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    bins = Path(a.bin_dir).resolve()
    base = Path(tempfile.mkdtemp(prefix="cx-measure-", dir="/var/tmp"))
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key")
    work = home / "work"
    work.mkdir()
    files = base / "www"
    files.mkdir()
    with open(files / "big.bin", "wb") as f:
        f.truncate(a.size_mb << 20)
    hosts = base / "hosts"
    hosts.write_text("127.0.0.1 localhost\n127.0.0.1 files.test\n")
    # A tree like a large checkout: many small files in nested directories.
    tree = work / "tree"
    for i in range(a.files):
        d = tree / f"d{i % 97}" / f"e{i % 13}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"line {i}\nsome text to search through\n" * 8)
    server, port = serve(files)
    url = f"http://files.test:{port}/big.bin"
    rows: list[str] = []
    plain = Daemon(bins, {}, hosts, home)
    proxied = Daemon(bins, {"CUBA_EXEC_NETWORK": "proxy", "CUBA_EXEC_PROXY_ALLOW": f"files.test:{port}"}, hosts, home)
    masked = Daemon(bins, {"CUBA_EXEC_SANDBOX": "workspace-write", "CUBA_EXEC_ALLOWED_DIRS": str(work)}, hosts, home)
    try:
        direct = speeds(plain, url, work, a.runs)
        through = speeds(proxied, url, work, a.runs)
        tunnel = speeds(proxied, url, work, a.runs, tunnel=True)
        d, t, c = (statistics.median(x) for x in (direct, through, tunnel))
        rows.append(f"download {a.size_mb} MB on loopback, curl, median of {a.runs}: straight {d:.0f} MB/s, through the proxy {t:.0f} MB/s ({t / d:.0%}) as a plain request, {c:.0f} MB/s ({c / d:.0%}) through a CONNECT tunnel")
        grep = "grep -r needle-not-there tree"
        g_plain = timed(plain, grep, work, a.runs)
        g_masked = timed(masked, grep, work, a.runs)
        rows.append(f"grep -r over {a.files} files, median of {a.runs}: no sandbox {statistics.median(g_plain) * 1000:.0f} ms, workspace-write with the default masks {statistics.median(g_masked) * 1000:.0f} ms")
        s_plain = starts(plain, work, 50)
        s_masked = starts(masked, work, 50)
        rows.append(f"cubactl run true, median of 50: no sandbox {statistics.median(s_plain):.1f} ms, workspace-write with the default masks {statistics.median(s_masked):.1f} ms")
    finally:
        for d in (plain, proxied, masked):
            d.close()
        server.shutdown()
        shutil.rmtree(base, ignore_errors=True)
    for r in rows:
        print(r)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
