"""The first error of a long output through the official MCP SDK: a real failing pytest run
between 229 KB of noise on each side, which no head or tail of a reply reaches."""

from __future__ import annotations

import sys

import pytest
from conftest import World
from test_mcp import call, limited, sc, text

pytestmark = pytest.mark.anyio


@limited(120.0)
async def test_a_cut_reply_keeps_the_first_error_and_names_it(world: World) -> None:
    tests = world.dir / "py"
    tests.mkdir()
    (tests / "test_x.py").write_text("def test_ok():\n    pass\n\ndef test_y():\n    assert 1 == 2\n")
    pytest_run = f"cd {tests} && {sys.executable} -m pytest -q -p no:cacheprovider test_x.py"
    async with world.client() as c:
        r = await call(c, "run", command=f"seq 1 40000; {pytest_run}; seq 1 40000")
        header = text(r).splitlines()[0]
        errors = sc(r)["errors"]
        first = errors["first"]
        assert first["line"] == "E       assert 1 == 2" and first["location"] == "test_x.py:5", errors
        assert f" first:test_x.py:5@{first['cursor']}" in header, header
        assert errors["last"]["line"].startswith("FAILED test_x.py::test_y"), errors
        out = sc(r)["output"]
        # Shown between two cut markers though it sits in the middle.
        at = out.index("\nE       assert 1 == 2\n")
        assert out.index("bytes truncated ...]") < at < out.rindex("bytes truncated ...]"), out
        assert f"since={first['cursor']}" in sc(r)["hint"], sc(r)["hint"]
        s = await call(c, "status", id=sc(r)["id"], since=first["cursor"])
        assert sc(s)["output"].startswith("E       assert 1 == 2\n"), sc(s)["output"][:200]
