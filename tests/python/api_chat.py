"""The OpenAI Chat Completions API as the stand-in model speaks it (streamed chunks, then
`[DONE]`), for the clients that use it: opencode (through `@ai-sdk/openai-compatible`) and
Copilot CLI (through the OpenAI JS SDK). A tool result is a `role: "tool"` message whose
`content` is what the model reads."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, Optional

from clients_harness import Conversation, Seen, send_json, send_sse

MODEL = "standin-model"


def _text_of(content: Any) -> str:
    """A Chat Completions message content as the model reads it: the string, or its text parts
    joined with "\n"."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return json.dumps(content)


class ChatApi:
    """Chat Completions, streamed: `POST /v1/chat/completions` and `GET /v1/models`."""

    def __init__(self, model: str = MODEL) -> None:
        self.model = model

    def conversation(self, path: str, body: Any) -> Optional[Conversation]:
        if not path.rstrip("/").endswith("/chat/completions") or not isinstance(body, dict):
            return None
        tools = body.get("tools") or []
        # The main conversation offers tools; a background request (a session name, a prompt
        # refinement) does not.
        if not tools:
            return None
        offered = {}
        for t in tools:
            fn = t.get("function", {}) if isinstance(t, dict) else {}
            if fn.get("name"):
                offered[fn["name"]] = t
        names: dict[str, str] = {}
        results: list[Seen] = []
        system: list[str] = []
        first_user: Optional[str] = None
        for m in body.get("messages") or []:
            role = m.get("role")
            if role in ("system", "developer"):
                system.append(_text_of(m.get("content")))
            elif role == "user" and first_user is None:
                first_user = _text_of(m.get("content"))
            elif role == "assistant":
                for tc in m.get("tool_calls") or []:
                    names[tc.get("id", "")] = tc.get("function", {}).get("name", "")
            elif role == "tool":
                cid = m.get("tool_call_id", "")
                results.append(Seen(call_id=cid, name=names.get(cid, ""), text=_text_of(m.get("content")), raw=m, is_error=None))
        preamble = "\n".join(system + ([first_user] if first_user is not None else []))
        return Conversation(results=results, tools=offered, preamble=preamble)

    def _chunk(self, delta: dict[str, Any], finish: Optional[str] = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-standin",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _usage(self) -> dict[str, Any]:
        return {
            "id": "chatcmpl-standin",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": self.model,
            "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }

    def _message(self, message: dict[str, Any], finish: str) -> dict[str, Any]:
        return {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": 1700000000,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }

    def tool_call(self, h: BaseHTTPRequestHandler, path: str, body: Any, name: str, args: dict[str, Any], call_id: str) -> None:
        call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        if isinstance(body, dict) and body.get("stream"):
            send_sse(
                h,
                [
                    (None, self._chunk({"role": "assistant", "content": None, "tool_calls": [call]})),
                    (None, self._chunk({}, "tool_calls")),
                    (None, self._usage()),
                    (None, "[DONE]"),
                ],
            )
        else:
            del call["index"]
            send_json(h, self._message({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"))

    def text(self, h: BaseHTTPRequestHandler, path: str, body: Any, text: str) -> None:
        if isinstance(body, dict) and body.get("stream"):
            send_sse(
                h,
                [
                    (None, self._chunk({"role": "assistant", "content": text})),
                    (None, self._chunk({}, "stop")),
                    (None, self._usage()),
                    (None, "[DONE]"),
                ],
            )
        else:
            send_json(h, self._message({"role": "assistant", "content": text}, "stop"))

    def other(self, h: BaseHTTPRequestHandler, method: str, path: str, body: Any) -> bool:
        if method == "POST" and path.rstrip("/").endswith("/chat/completions"):
            return False
        if method == "GET" and path.rstrip("/").endswith("/models"):
            send_json(h, {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "standin"}]})
            return True
        send_json(h, {"error": {"message": f"not served: {method} {path}"}}, status=404)
        return True
