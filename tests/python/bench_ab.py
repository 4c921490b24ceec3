"""Two builds side by side: `run "echo hi"` through each build's MCP server and daemon,
interleaved in one loop with a direct `sh -c` and a ping, so that both see the same machine.
Prints, per build, the median and "ours" (run - floor - ping), and the CPU its daemon and its
MCP server spent per call (from /proc/PID/stat).

Run (each directory holds a `cubad` and a `cuba-exec`, e.g. two `target/release` copies):
    python3 tests/python/bench_ab.py DIR_A DIR_B [--calls 400]
A directory may carry environment for its daemon: `DIR:CUBA_EXEC_CGROUPS=off`.

A benchmark, not a test: it prints figures and fails nothing. It speaks JSON-RPC itself (no SDK),
so that the client's own cost is the same small constant for both builds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

CALL = {"name": "run", "arguments": {"command": "echo hi"}}


class Pair:
    """A daemon on a socket of its own and an MCP server talking to it."""

    def __init__(self, spec: str, tag: str) -> None:
        bindir, *envs = spec.split(":")
        env = dict(os.environ, **dict(e.split("=", 1) for e in envs))
        self.dir = tempfile.mkdtemp(prefix=f"cxab{tag}", dir="/tmp")
        sock = os.path.join(self.dir, "s")
        self.daemon = subprocess.Popen(
            [os.path.join(bindir, "cubad"), "--socket", sock, "--state-dir", self.dir + "/st"],
            stderr=subprocess.DEVNULL,
            env=env,
        )
        until = time.monotonic() + 10
        while not os.path.exists(sock):
            if time.monotonic() > until:
                raise SystemExit(f"{bindir}/cubad did not start")
            time.sleep(0.01)
        self.shim = subprocess.Popen(
            [os.path.join(bindir, "cuba-exec")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(os.environ, CUBA_EXEC_SOCKET=sock),
        )
        self.next = 0
        self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "ab", "version": "1"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg: dict) -> None:
        assert self.shim.stdin is not None
        self.shim.stdin.write((json.dumps(msg) + "\n").encode())
        self.shim.stdin.flush()

    def request(self, method: str, params: dict) -> bytes:
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        want = f'"id":{self.next}'.encode()
        assert self.shim.stdout is not None
        while True:
            line = self.shim.stdout.readline()
            if not line:
                raise SystemExit("cuba-exec closed its stdout")
            if want in line:
                return line

    def cpu_ticks(self, proc: subprocess.Popen) -> int:
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def close(self) -> None:
        self.shim.kill()
        self.shim.wait()
        # An orderly stop: the daemon removes its cgroups.
        self.daemon.terminate()
        self.daemon.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--calls", type=int, default=400)
    args = p.parse_args()
    pairs = {"A": Pair(args.a, "A"), "B": Pair(args.b, "B")}
    try:
        for pair in pairs.values():
            for _ in range(30):
                pair.request("tools/call", CALL)
        tick = os.sysconf("SC_CLK_TCK")
        before = {k: (v.cpu_ticks(v.daemon), v.cpu_ticks(v.shim)) for k, v in pairs.items()}
        times: dict[str, list[float]] = {"A": [], "B": [], "floor": [], "ping": []}
        for i in range(args.calls):
            t = time.perf_counter()
            subprocess.run(["/bin/sh", "-c", "echo hi"], stdout=subprocess.PIPE, check=True)
            times["floor"].append(time.perf_counter() - t)
            t = time.perf_counter()
            pairs["A"].request("ping", {})
            times["ping"].append(time.perf_counter() - t)
            pairs["B"].request("ping", {})
            for k in ("A", "B") if i % 2 == 0 else ("B", "A"):
                t = time.perf_counter()
                pairs[k].request("tools/call", CALL)
                times[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        for k, pair in pairs.items():
            d0, s0 = before[k]
            d = (pair.cpu_ticks(pair.daemon) - d0) / tick / args.calls * 1e3
            s = (pair.cpu_ticks(pair.shim) - s0) / tick / args.calls * 1e3
            ours = med[k] - med["floor"] - med["ping"]
            print(
                f"{k}: run {med[k]:.3f} ms  ours {ours:.3f} ms  "
                f"CPU per call: daemon {d:.3f} ms, MCP server (with a ping) {s:.3f} ms"
            )
        print(f"floor (sh -c) {med['floor']:.3f} ms  ping {med['ping']:.3f} ms")
    finally:
        for pair in pairs.values():
            pair.close()


if __name__ == "__main__":
    main()
