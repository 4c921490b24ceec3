"""Claude Code `Elicitation` hook for test_client_approvals.py: answers a person's approval form
the way the test chooses, and records what it was asked.

Claude Code runs it (settings.json `hooks.Elicitation`, matched by MCP server name) with the
request on stdin: `{"hook_event_name": "Elicitation", "mcp_server_name", "message", "mode",
"requested_schema", ...}`. It inherits the client's environment:

- `APPROVAL_HOOK_LOG`: a file the input is appended to, one JSON object a line;
- `APPROVAL_HOOK_DECISION`: `approve_once`, `approve_always` or `deny` (an accepted form with that
  `decision`), or `decline` / `cancel` (the form dismissed);
- `APPROVAL_HOOK_REASON`: the form's optional `reason`.

It prints `{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": ..., "content": ...}}`
and exits 0.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    raw = sys.stdin.read()
    log = os.environ.get("APPROVAL_HOOK_LOG")
    if log:
        try:
            data = json.loads(raw)
        except ValueError:
            data = {"unparsed": raw}
        with open(log, "a") as f:
            f.write(json.dumps(data) + "\n")
    decision = os.environ.get("APPROVAL_HOOK_DECISION", "cancel")
    out: dict = {"hookEventName": "Elicitation"}
    if decision in ("decline", "cancel"):
        out["action"] = decision
    else:
        content = {"decision": decision}
        reason = os.environ.get("APPROVAL_HOOK_REASON")
        if reason:
            content["reason"] = reason
        out["action"] = "accept"
        out["content"] = content
    print(json.dumps({"hookSpecificOutput": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
