"""10 000 initializes, their method name JSON-escaped, from one token against a private daemon and
endpoint: how many sessions open, and the endpoint's RSS before and after.

Usage: python3 tests/python/bench_http_sessions.py target/release
"""
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def until(cond, what: str, limit: float = 10.0) -> None:
    deadline = time.time() + limit
    while not cond():
        if time.time() > deadline:
            sys.exit(f"not ready in {limit} s: {what}")
        time.sleep(0.02)


bin_dir = sys.argv[1]
d = tempfile.mkdtemp(prefix="cx-measure-")
env = dict(os.environ, CUBA_EXEC_SOCKET=f"{d}/s.sock", CUBA_EXEC_STATE_DIR=f"{d}/state",
           CUBA_EXEC_CONFIG=f"{d}/config.toml", CUBA_EXEC_TOKENS=f"{d}/tokens.toml", NO_COLOR="1")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
open(f"{d}/config.toml", "w").write(f'[http]\nlisten = "127.0.0.1:{port}"\n')
daemon = subprocess.Popen([f"{bin_dir}/cubad"], env=env, stderr=subprocess.DEVNULL)
until(lambda: os.path.exists(f"{d}/s.sock"), "the daemon's socket")
tok = subprocess.run([f"{bin_dir}/cubactl", "token", "create", "m"], env=env, capture_output=True, text=True).stdout
tok = [w for w in tok.split() if w.startswith("cubatok_")][0]
srv = subprocess.Popen([f"{bin_dir}/cuba-exec", "serve", "--http"], env=env, stderr=subprocess.DEVNULL)
until(lambda: os.path.exists(f"{d}/state/http.json"), "the endpoint")
def rss(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
body = b'{"jsonrpc":"2.0","id":1,"method":"\\u0069nitialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"m","version":"1"}}}'
before = rss(srv.pid); opened = refused = 0; t0 = time.time()
c = http.client.HTTPConnection("127.0.0.1", port)
for i in range(10000):
    c.request("POST", "/mcp", body, {"Authorization": f"Bearer {tok}", "Content-Type": "application/json",
              "Accept": "application/json, text/event-stream", "Host": f"127.0.0.1:{port}"})
    r = c.getresponse(); r.read()
    if r.getheader("mcp-session-id"): opened += 1
    elif r.status == 429: refused += 1
print(f"10000 escaped initializes in {time.time()-t0:.1f} s: {opened} sessions opened, {refused} refused 429; endpoint RSS {before} MB -> {rss(srv.pid)} MB")
srv.terminate()
srv.wait()
daemon.terminate()
daemon.wait()
shutil.rmtree(d, ignore_errors=True)
