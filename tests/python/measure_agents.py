"""Four agents on one machine, without and with budgets per agent: the CPU each agent's processes
get, and how fast a fifth client's `run "echo hi"` answers meanwhile, measured with the official
Python MCP SDK against the real binaries.

Each condition has a private daemon (a fresh `conftest.World("legacy")`, cleaned up after it):
- four MCP clients named `agent-1` … `agent-4` connect at once (a shim each; the first one
  starts the daemon) and each `start`s a CPU hog (`while :; do :; done`) and a dev server
  (`python3 -m http.server` on `port: "auto"`, checked with an HTTP GET);
- for `--window` seconds (default 10) each agent's CPU is read from /proc/PID/stat
  (utime + stime of the processes marked `CUBA_EXEC_PROCESS=<instance>.<id>` for its ids) at the
  start and the end: cores = CPU seconds / window; the machine's busy cores from /proc/stat too;
- meanwhile a fifth client, `probe`, calls `run "echo hi"` `--calls` times (default 40), spread
  over the window (back to back if slower), each call timed: median and p95;
- then `list_processes` from agent-1, whose text is printed under the table.

Conditions: `without` (no budget); `with` (each of the four agents its own `[agents.NAME]`
budget through CUBA_EXEC_AGENTS, `--budget-cpu 0.4 --budget-memory 512M --budget-pids 256`; the
probe has none); `with-probe` (the same budget for every MCP client, CUBA_EXEC_AGENT_CPU /
_MEMORY / _PIDS: the probe's `echo hi` is placed in a budget of its own too, which on a machine
whose controllers are cgroup v1 is a migration per spawn). The daemon takes them from the first
shim's environment, so they are in the world's environment before any client starts.

Run (after `cargo build --release --workspace --bins`, from the repository root):
    .venv/bin/python tests/python/measure_agents.py [--bin-dir target/release] [--window 10]
        [--calls 40] [--only without|with] [--budget-cpu 0.4] [--budget-memory 512M]
        [--budget-pids 256]

A measurement, not a test: it prints a markdown table and fails nothing; it exits non-zero with a
message when the setup breaks (a client cannot connect, a `start` is refused, a daemon refuses
the budget keys).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import statistics
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conftest  # noqa: E402

AGENTS = [f"agent-{i}" for i in range(1, 5)]
PROBE = "probe"
HOG = "while :; do :; done"
SERVER = 'exec python3 -m http.server "$PORT" --bind 127.0.0.1'
CONDITIONS = ["without", "with", "with-probe"]
TICK = os.sysconf("SC_CLK_TCK")
HEADER = re.compile(r"^\[id:(\d+)(?:[^\]]*?\bport:(\d+))?")


class SetupError(Exception):
    """The measurement cannot go on: the message says why."""


def text_of(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "text", None) is not None)


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of `pid`, in seconds; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    # Fields 14 and 15 of proc(5), counted from the state (field 3) here.
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy() -> tuple[float, float]:
    """(busy, all) CPU seconds of the machine since boot, from /proc/stat."""
    parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
    ticks = [int(x) for x in parts]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / TICK, sum(ticks) / TICK


def percentile(samples: list[float], p: float) -> float:
    """Nearest rank."""
    s = sorted(samples)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def agent_limits(world: conftest.World) -> dict[str, dict[str, str]]:
    """The `agent.*` cgroups under the daemon's `cuba-exec-<instance>` (v2 tree and v1 cpu,
    memory and pids hierarchies), each with the limits found in it: `cpu` (cores), `memory`,
    `pids`. Empty without budgets."""
    pid, instance = world.daemon_pid(), world.instance()
    if pid is None or instance is None:
        return {}
    own: dict[str, str] = {}
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(","):
                own[c] = path
        mounts = [line.split(" - ") for line in Path("/proc/self/mountinfo").read_text().splitlines() if " - " in line]
    except OSError:
        return {}

    def read(f: Path) -> str | None:
        try:
            return f.read_text().strip()
        except OSError:
            return None

    found: dict[str, dict[str, str]] = {}
    for left, right in mounts:
        point = left.split(" ")[4]
        fstype, _, options = (right.split(" ") + ["", "", ""])[:3]
        if fstype == "cgroup2":
            kinds = [""]
        elif fstype == "cgroup":
            kinds = [c for c in ("cpu", "memory", "pids") if c in options.split(",")]
        else:
            continue
        for kind in kinds:
            if kind not in own:
                continue
            base = Path(point + own[kind].rstrip("/")) / f"cuba-exec-{instance}"
            try:
                groups = [d for d in base.iterdir() if d.is_dir() and d.name.startswith("agent.")]
            except OSError:
                continue
            for d in groups:
                limits = found.setdefault(d.name, {})
                if (v := read(d / "cpu.max")) is not None:  # v2: "quota period"
                    quota, period = (v.split() + ["100000"])[:2]
                    limits["cpu"] = "max" if quota == "max" else f"{int(quota) / int(period):g}"
                quota, period = read(d / "cpu.cfs_quota_us"), read(d / "cpu.cfs_period_us")
                if quota is not None and period:  # v1: -1 is no limit
                    limits["cpu"] = "max" if quota == "-1" else f"{int(quota) / int(period):g}"
                for name in ("memory.max", "memory.limit_in_bytes"):
                    if (v := read(d / name)) is not None:
                        # v1 says "no limit" with a huge number, v2 with "max".
                        limits["memory"] = "max" if v == "max" or int(v) >= 1 << 62 else f"{int(v) / (1 << 20):g}M"
                if (v := read(d / "pids.max")) is not None:
                    limits["pids"] = v
    return dict(sorted(found.items()))


def http_ok(port: int, deadline: float) -> str | None:
    """None once 127.0.0.1:`port` answers a GET (tried until `deadline`), else the last error."""
    error = "not tried"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=3) as r:
                r.read()
                return None
        except (OSError, urllib.error.URLError) as e:
            error = repr(e)
            time.sleep(0.2)
    return error


async def start(client: Any, name: str, args: dict[str, Any]) -> tuple[int, int | None]:
    """`start` with `args`: (id, port)."""
    res = await client.call_tool("start", args)
    text = text_of(res)
    if res.is_error:
        raise SetupError(f"{name}: start {args} refused: {text}")
    s = getattr(res, "structured_content", None) or {}
    if "id" in s:
        return int(s["id"]), (int(s["port"]) if s.get("port") is not None else None)
    m = HEADER.search(text)
    if not m:
        raise SetupError(f"{name}: no id in the start reply: {text!r}")
    return int(m.group(1)), (int(m.group(2)) if m.group(2) else None)


async def condition(label: str, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    world = conftest.World("legacy")
    # The daemon takes its settings from the first shim's environment: every client's is this.
    world.env.update(env)
    load = os.getloadavg()
    row: dict[str, Any] = {"condition": label, "env": env, "load": load}
    ids: dict[str, list[int]] = {}
    ports: dict[str, int] = {}
    clients_ready = anyio.Event()
    ready: set[str] = set()
    go = anyio.Event()
    probe_done = anyio.Event()
    done = anyio.Event()
    times: list[float] = []
    failed: list[str] = []

    def mark_ready(name: str) -> None:
        ready.add(name)
        if len(ready) == len(AGENTS) + 1:
            clients_ready.set()

    async def agent(name: str) -> None:
        async with world.client(name=name) as c:
            hog, _ = await start(c, name, {"command": HOG, "name": "hog"})
            server, port = await start(c, name, {"command": SERVER, "name": "web", "port": "auto"})
            if port is None:
                raise SetupError(f"{name}: the dev server's start reply has no port")
            ids[name] = [hog, server]
            ports[name] = port
            mark_ready(name)
            await done.wait()
            if name == AGENTS[0]:
                res = await c.call_tool("list_processes", {})
                row["listing"] = text_of(res)

    async def probe() -> None:
        async with world.client(name=PROBE) as c:
            for _ in range(3):  # warm-up, not timed
                await c.call_tool("run", {"command": "echo hi"})
            mark_ready(PROBE)
            await go.wait()
            began = time.monotonic()
            step = args.window / max(args.calls, 1)
            for k in range(args.calls):
                await anyio.sleep(max(0.0, began + k * step - time.monotonic()))
                t = time.perf_counter()
                res = await c.call_tool("run", {"command": "echo hi"})
                times.append(time.perf_counter() - t)
                text = text_of(res)
                if res.is_error or not text.rstrip().endswith("hi"):
                    failed.append(text)
            probe_done.set()
            await done.wait()

    try:
        with anyio.fail_after(args.window + 180):
            async with anyio.create_task_group() as tg:
                for name in AGENTS:
                    tg.start_soon(agent, name)
                tg.start_soon(probe)
                await clients_ready.wait()

                deadline = time.monotonic() + 15
                errors = {
                    n: await anyio.to_thread.run_sync(http_ok, ports[n], deadline) for n in AGENTS
                }
                row["http"] = sum(e is None for e in errors.values())
                for n, e in errors.items():
                    if e is not None:
                        print(f"[{label}] {n}: the dev server on port {ports[n]} did not answer: {e}", file=sys.stderr)

                pids = {n: [p for i in ids[n] for p in world.marked(pid_id=i)] for n in AGENTS}
                if any(not p for p in pids.values()):
                    raise SetupError(f"no marked processes for some agent: {pids} (ids {ids})")
                before = {n: {p: cpu_seconds(p) for p in pids[n]} for n in AGENTS}
                m0, t0 = machine_busy(), time.monotonic()
                go.set()
                await anyio.sleep(args.window)
                after = {n: {p: cpu_seconds(p) for p in pids[n]} for n in AGENTS}
                m1, t1 = machine_busy(), time.monotonic()
                window = t1 - t0
                cores = {}
                for n in AGENTS:
                    used = sum((after[n][p] or 0.0) - (before[n][p] or 0.0) for p in pids[n] if after[n][p] is not None)
                    cores[n] = used / window
                row["cores"] = cores
                row["total"] = sum(cores.values())
                row["machine"] = (m1[0] - m0[0]) / window
                row["window"] = window
                row["cgroups"] = agent_limits(world)
                await probe_done.wait()
                done.set()
    finally:
        world.cleanup()
    if not times:
        raise SetupError("the probe timed no call")
    row["probe_median"] = statistics.median(times) * 1000
    row["probe_p95"] = percentile(times, 95) * 1000
    row["probe_failed"] = failed
    return row


def first_error(e: BaseException) -> BaseException:
    """The first leaf of an exception group (a task group's failure)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def table(rows: list[dict[str, Any]], nproc: int, keys: str) -> str:
    head = "| condition | " + " | ".join(AGENTS) + " | agents total | machine busy | probe `run \"echo hi\"` median / p95 (ms) | dev servers answering | nproc | load avg at start |"
    lines = [head, "|" + "---|" * (len(AGENTS) + 7)]
    for r in rows:
        budget = {"without": "none", "with": f"agents only: {keys}", "with-probe": f"every client: {keys}"}[r["condition"]]
        if r["env"] and not r["cgroups"]:
            budget += ": NOT APPLIED"
        per = " | ".join(f"{r['cores'][n]:.2f}" for n in AGENTS)
        load = " ".join(f"{x:.2f}" for x in r["load"])
        lines.append(
            f"| {r['condition']} ({budget}) | {per} | {r['total']:.2f} | {r['machine']:.2f} | "
            f"{r['probe_median']:.1f} / {r['probe_p95']:.1f} | {r['http']}/{len(AGENTS)} | {nproc} | {load} |"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> int:
    bins = Path(args.bin_dir).resolve()
    # Before any World: one would leave its temp dir behind on a missing binary.
    for exe in ("cubad", "cuba-exec"):
        if not (bins / exe).is_file():
            print(f"measure_agents: {bins / exe} not found: build the binaries (or pass --bin-dir)", file=sys.stderr)
            return 1
    os.environ["CUBA_EXEC_BIN_DIR"] = str(bins)
    # `with`: the four agents' own tables, the probe free; `with-probe`: the defaults for every
    # MCP client, the probe's `echo hi` held (and placed) by a budget of its own too.
    keys = f"cpu={args.budget_cpu},memory={args.budget_memory},pids={args.budget_pids}"
    tables = {"CUBA_EXEC_AGENTS": ";".join(f"{a}:{keys}" for a in AGENTS)}
    defaults = {
        "CUBA_EXEC_AGENT_CPU": args.budget_cpu,
        "CUBA_EXEC_AGENT_MEMORY": args.budget_memory,
        "CUBA_EXEC_AGENT_PIDS": args.budget_pids,
    }
    conditions = [args.only] if args.only else CONDITIONS
    nproc = len(os.sched_getaffinity(0))
    rows = []
    for label in conditions:
        env = {"without": {}, "with": tables, "with-probe": defaults}[label]
        print(f"[{label}] {args.window:g} s window, {args.calls} probe calls ...", file=sys.stderr, flush=True)
        try:
            rows.append(await condition(label, env, args))
        except Exception as e:  # noqa: BLE001: the setup broke, say how
            err = first_error(e)
            what = f"{type(err).__name__}: {err}" if str(err) else repr(err)
            print(f"measure_agents: the `{label}` condition broke: {what}", file=sys.stderr)
            if label != "without":
                print("  (a daemon without budgets per agent refuses CUBA_EXEC_AGENT_*: is it built with them?)", file=sys.stderr)
            return 1
    print("command: " + shlex.join([sys.executable, *sys.argv]))
    print()
    print(table(rows, nproc, keys))
    for r in rows:
        print()
        print(f"### {r['condition']}: window {r['window']:.2f} s")
        if r["cgroups"]:
            print("agent cgroups, with the limits read from them:")
            for name, limits in r["cgroups"].items():
                print(f"- {name}: " + (", ".join(f"{k} {v}" for k, v in sorted(limits.items())) or "no limit"))
        else:
            print("agent cgroups: none")
        if "CUBA_EXEC_AGENT_CPU" in r["env"]:
            print("(CUBA_EXEC_AGENT_* is a budget for each MCP client: the probe has one too)")
        if r["env"]:
            if not r["cgroups"]:
                print("**Budgets asked for but not applied: the daemon made no `agent.*` cgroup (is it built with budgets per agent?)**")
        if r["probe_failed"]:
            print(f"probe calls failed: {len(r['probe_failed'])}; first: {r['probe_failed'][0]!r}")
        print("list_processes from agent-1:")
        print("```")
        print(r.get("listing", "(none)"))
        print("```")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin-dir", default="target/release")
    p.add_argument("--window", type=float, default=10.0, help="seconds measured (default 10)")
    p.add_argument("--calls", type=int, default=40, help="probe `run \"echo hi\"` calls (default 40)")
    p.add_argument("--only", choices=CONDITIONS, help="one condition only")
    p.add_argument("--budget-cpu", default="0.4", help="cores per agent (CUBA_EXEC_AGENT_CPU)")
    p.add_argument("--budget-memory", default="512M", help="CUBA_EXEC_AGENT_MEMORY")
    p.add_argument("--budget-pids", default="256", help="CUBA_EXEC_AGENT_PIDS")
    sys.exit(anyio.run(main, p.parse_args()))
