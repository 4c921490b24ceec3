"""Gemini CLI as a real client of cuba-exec: the Gemini API as the stand-in speaks it, and the driver.

Gemini CLI (`@google/gemini-cli`, program `gemini`) talks to the Gemini API through the
`@google/genai` SDK: `POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse` for the
main conversation (server-sent events, one `data: <GenerateContentResponse>` per chunk) and
`POST {base}/v1beta/models/{model}:generateContent` for its side calls (JSON answers with
`generationConfig.responseMimeType = "application/json"` and a `responseJsonSchema`: the
model router's classifier, the loop detector, the next-speaker check; none of them runs with
an explicit `-m` model and the settings below, but each gets an answer in its own schema if
it comes). `{base}` is `GOOGLE_GEMINI_BASE_URL`; the key (`GEMINI_API_KEY`) is sent in the
`x-goog-api-key` header.

What Gemini CLI 0.61.0 hands the model of an MCP tool result (read from its bundle, checked by
probe_clients.py gemini):
- success: a `functionResponse` part `{"id": <call id>, "name": "mcp_cuba-exec_<tool>",
  "response": {"output": T}}` in a `user` turn, where T is each text block of the result
  wrapped as `<untrusted_context>\\n{text}\\n</untrusted_context>` and the blocks joined with
  "\\n"; `structuredContent` is dropped.
- `isError: true` (or a failed call): `"response": {"error": "MCP tool '<tool>' reported tool
  error for function call: {\\"name\\":...,\\"args\\":{...}} with response: [<JSON of the whole
  functionResponse: content, structuredContent, isError>]"}`.
- one text block longer than `tools.truncateToolOutputThreshold` (40 000 chars, counting the
  wrapper) is cut to its first 20 % and last 80 % of that threshold, and the whole text is
  saved to `~/.gemini/tmp/<project>/tool-outputs/session-<id>/<tool>_<call id>.txt`, named in
  the text the model gets.
- tool names `mcp_cuba-exec_<tool>`; every tool's schema gets a `wait_for_previous` boolean
  property (and Gemini 3 models' system prompt tells them to set it), which the model's
  arguments carry through to our server unchanged; the client adds no argument itself.
- our server's `instructions` go into the first user turn (`<session_context>` ...
  `<project_context>`), in a trusted folder only.
"""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Optional

from clients_harness import (
    server_env_of,
    Call,
    Conversation,
    Run,
    Seen,
    StandIn,
    installed,
    merge_settings,
    run_client,
    send_json,
    send_sse,
    setup_env,
)

NAME = "gemini"
VERSION = "0.61.0"
PROGRAM = "gemini"
# The model named on the command line (`-m`): a Gemini 3 model, as Gemini CLI's own default
# (`auto`) picks for an API-key user, so the client uses its current ("modern") system prompt.
MODEL = os.environ.get("CUBA_EXEC_GEMINI_MODEL", "gemini-3.1-pro-preview")
PROMPT = "Use the cuba-exec tools as instructed."


def _usage(prompt_tokens: int = 100, out_tokens: int = 10) -> dict[str, Any]:
    return {"promptTokenCount": prompt_tokens, "candidatesTokenCount": out_tokens, "totalTokenCount": prompt_tokens + out_tokens}


def _schema_instance(schema: Any) -> Any:
    """A value valid for a (Gemini-flavoured) JSON schema: what a side call that wants JSON
    gets. Enums take their first value (the classifier's `flash`, the next-speaker check's
    `user`), numbers 0 (the loop detector's confidence), booleans false."""
    if not isinstance(schema, dict):
        return "OK."
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type") or ("object" if "properties" in schema else "string")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _schema_instance(v) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return "OK."


class GeminiApi:
    """The Gemini API (v1beta generateContent / streamGenerateContent / countTokens)."""

    @staticmethod
    def _model(path: str) -> str:
        tail = path.split("/models/", 1)[-1]
        return tail.split(":", 1)[0]

    def _answer(self, h: BaseHTTPRequestHandler, path: str, parts: list[dict[str, Any]]) -> None:
        chunk = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": _usage(),
            "modelVersion": self._model(path),
            "responseId": "standin",
        }
        if ":streamGenerateContent" in path:
            send_sse(h, [(None, chunk)])
        else:
            send_json(h, chunk)

    def other(self, h: BaseHTTPRequestHandler, method: str, path: str, body: Any) -> bool:
        if ":countTokens" in path:
            send_json(h, {"totalTokens": 100})
            return True
        if ":embedContent" in path or ":batchEmbedContents" in path:
            n = len(body.get("requests") or [None]) if isinstance(body, dict) else 1
            send_json(h, {"embeddings": [{"values": [0.0] * 8}] * n})
            return True
        if method == "GET":
            send_json(h, {"models": []})
            return True
        return False

    def conversation(self, path: str, body: Any) -> Optional[Conversation]:
        if not isinstance(body, dict):
            return None
        tools: dict[str, Any] = {}
        for group in body.get("tools") or []:
            for decl in group.get("functionDeclarations") or []:
                tools[decl["name"]] = decl
        if not any("cuba" in n for n in tools):
            return None
        results: list[Seen] = []
        for content in body.get("contents") or []:
            for part in content.get("parts") or []:
                fr = part.get("functionResponse")
                if not isinstance(fr, dict):
                    continue
                response = fr.get("response") or {}
                if "output" in response and isinstance(response["output"], str):
                    text, is_error = response["output"], False
                elif "error" in response:
                    err = response["error"]
                    text, is_error = (err if isinstance(err, str) else json.dumps(err)), True
                else:
                    text, is_error = json.dumps(response), None
                results.append(Seen(call_id=str(fr.get("id") or ""), name=str(fr.get("name") or ""), text=text, raw=part, is_error=is_error))
        preamble = []
        system = body.get("systemInstruction")
        if isinstance(system, dict):
            preamble += [p.get("text", "") for p in system.get("parts") or [] if isinstance(p, dict)]
        elif isinstance(system, str):
            preamble.append(system)
        for content in body.get("contents") or []:
            if content.get("role") == "user":
                preamble += [p["text"] for p in content.get("parts") or [] if isinstance(p.get("text"), str)]
                break
        return Conversation(results=results, tools=tools, preamble="\n".join(preamble))

    def tool_call(self, h: BaseHTTPRequestHandler, path: str, body: Any, name: str, args: dict[str, Any], call_id: str) -> None:
        self._answer(h, path, [{"functionCall": {"id": call_id, "name": name, "args": args}}])

    def text(self, h: BaseHTTPRequestHandler, path: str, body: Any, text: str) -> None:
        config = (body or {}).get("generationConfig") or {} if isinstance(body, dict) else {}
        if config.get("responseMimeType") == "application/json":
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            text = json.dumps(_schema_instance(schema))
        self._answer(h, path, [{"text": text}])


def server_entry(world: Any) -> dict[str, Any]:
    """Our server's entry in `mcpServers` of ~/.gemini/settings.json."""
    bin_dir = world.shim.parent
    return {
        "command": str(bin_dir / "cuba-exec"),
        "args": [],
        "env": server_env_of(world),
        # Runs our tools without a confirmation (a policy rule `mcp_cuba-exec_*` -> allow);
        # without it a headless run denies every MCP call. Takes effect in a trusted folder only.
        "trust": True,
    }


# Settings of ours, not of the MCP entry: they keep the client on loopback and quiet.
QUIET_SETTINGS: dict[str, Any] = {
    # A key from GEMINI_API_KEY, sent to GOOGLE_GEMINI_BASE_URL. Without it the base URL alone
    # selects the `gateway` auth type, which a headless run refuses ("Invalid auth method").
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    # Clearcut usage statistics (play.googleapis.com) and OpenTelemetry off.
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    # npm update check and auto-update off (interactive only, off for good measure).
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "ide": {"enabled": False},
}


def write_settings(home: Path, patch: dict[str, Any]) -> Path:
    return merge_settings(home / ".gemini" / "settings.json", patch)


def configure_by_hand(world: Any, home: Path) -> Path:
    """Writes our server's entry into ~/.gemini/settings.json as a user would (what `cubactl
    setup --client gemini` will write)."""
    path = home / ".gemini" / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings.setdefault("mcpServers", {})["cuba-exec"] = server_entry(world)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def trust_folder(home: Path, folder: Path) -> Path:
    """Trusts `folder` as the user does in the interactive trust dialog. A headless run in an
    untrusted folder exits at once; a trusted folder is also where the `trust` of an MCP
    server and its `instructions` take effect."""
    path = home / ".gemini" / "trustedFolders.json"
    folders = json.loads(path.read_text()) if path.exists() else {}
    folders[str(folder.resolve())] = "TRUST_FOLDER"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(folders, indent=2) + "\n")
    return path


class Driver:
    name = NAME
    version = VERSION
    client_info = "gemini-cli-mcp-client"

    def __init__(self, model: str = MODEL, configure: str = "cubactl", server_env: Optional[dict[str, str]] = None) -> None:
        self.model = model
        self.configure = configure
        # More variables in our MCP entry's env (e.g. CUBA_EXEC_STRUCTURED=always).
        self.server_env = server_env or {}

    @staticmethod
    def installed() -> bool:
        return installed(NAME, VERSION, PROGRAM) is not None

    def command(self) -> list[str]:
        exe = installed(NAME, VERSION, PROGRAM)
        if exe is None:
            raise FileNotFoundError(f"{NAME}@{VERSION} not installed: run scripts/clients install")
        return [str(exe), "-p", PROMPT, "-m", self.model, "--output-format", "text"]

    def run(self, world: Any, home: Path, workdir: Path, script: list[Call], extra_env: Optional[dict[str, str]] = None) -> Run:
        if self.configure == "cubactl":
            from clients_harness import cubactl_setup, env_flags

            # `trust: true`: without it a headless run offers none of our tools to the model.
            cubactl_setup(world, home, NAME, "--gemini-trust", *env_flags(self.server_env))
        else:
            configure_by_hand(world, home)
        write_settings(home, QUIET_SETTINGS)
        trust_folder(home, workdir)
        with StandIn(GeminiApi(), script) as standin:
            env = setup_env(world, home)
            env.update(GEMINI_API_KEY="test", GOOGLE_GEMINI_BASE_URL=standin.url)
            env.update(extra_env or {})
            return run_client(self.command(), env, workdir, standin)
