"""Replies sized for the transport: the official Python SDK reads one SSE event of at most
1 MiB, and a reply at the largest `max_output` the docs allow (1 MiB) must still reach it, over
HTTP in both protocol generations and over stdio. Its output is sent once, in the text block
(`structuredContent.output` empty, `output_omitted` saying how much); output that escaping in
JSON would take past the event is cut in its middle, with a line saying so, head and tail kept.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import World
from http_server import HttpServer
from test_mcp import call, limited, text

pytestmark = pytest.mark.anyio

LINE = "0123456789abcdefghijklmnopqrstuvwxyz\n"
MAX = 1024 * 1024


def big(n: int) -> str:
    """`n` bytes of lines, then a last line to find."""
    return f"yes {LINE.strip()} | head -c {n}; echo THE-END"




def check(result: Any, n: int, whole: bool) -> None:
    body = text(result)
    assert body.startswith("[id:") and body.rstrip().endswith("THE-END"), body[:200]
    lines = body.count(LINE)
    if whole:
        assert lines == n // len(LINE), (lines, body[:200])
        assert "bytes cut here" not in body
    else:
        assert "bytes cut here to keep this reply within the 1 MiB" in body, body[:200]
        assert n // len(LINE) * 0.8 < lines < n // len(LINE), lines
    s = result.structured_content
    if s is not None:
        assert s["output"] == "" and s["output_omitted"] >= n, {k: v for k, v in s.items() if k != "output"}


async def both(c: Any) -> None:
    check(await call(c, "run", command=big(900_000), max_output=MAX), 900_000, True)
    check(await call(c, "run", command=big(1_040_000), max_output=MAX), 1_040_000, False)


@limited()
async def test_a_one_mebibyte_reply_reaches_the_sdk_over_http(world: World, http: HttpServer) -> None:
    async with http.client(http.token("big")) as c:
        await both(c)


@limited()
async def test_a_one_mebibyte_reply_reaches_the_sdk_over_stdio(world: World) -> None:
    async with world.client("python-sdk") as c:
        await both(c)
