"""A stdio MCP proxy that makes a 2026-07-28 client fall back to the 2025 `initialize` era.

    legacy_proxy.py LOG -- COMMAND [ARG...]

Runs COMMAND (our `cuba-exec`) and passes every JSON-RPC line through both ways, except that it
answers the client's `server/discover` itself with error -32601 (method not found): a client that
tries 2026-07-28 first (Claude Code, Copilot) then sends `initialize` instead. Every line is
appended to LOG as `{"dir": "C>S" | "S>C" | "P>C", "msg": <the message>}`, one a line, for a
test to read what was exchanged. The proxy exits when the server does (or when the client closes
stdin and the server then exits).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any, BinaryIO


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    log_path, cmd = argv[1], argv[3:]
    server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    out_lock = threading.Lock()
    log_lock = threading.Lock()
    log = open(log_path, "a", buffering=1)

    def record(direction: str, line: bytes) -> None:
        try:
            msg: Any = json.loads(line)
        except ValueError:
            msg = line.decode(errors="replace")
        with log_lock:
            log.write(json.dumps({"dir": direction, "msg": msg}) + "\n")

    def to_client(line: bytes) -> None:
        with out_lock:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    def server_to_client(stdout: BinaryIO) -> None:
        for line in stdout:
            record("S>C", line)
            try:
                to_client(line)
            except OSError:
                break

    pump = threading.Thread(target=server_to_client, args=(server.stdout,), daemon=True)
    pump.start()
    try:
        for line in sys.stdin.buffer:
            record("C>S", line)
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            if isinstance(msg, dict) and msg.get("method") == "server/discover" and "id" in msg:
                reply = (json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}) + "\n").encode()
                record("P>C", reply)
                to_client(reply)
                continue
            server.stdin.write(line)
            server.stdin.flush()
    except (BrokenPipeError, OSError):
        pass
    try:
        server.stdin.close()
    except OSError:
        pass
    code = server.wait()
    pump.join(timeout=5)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
