"""``memstack mcp`` as an MCP host runs it: a subprocess on stdio, driven by the SDK's ClientSession."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

from tests.integrations.mcp_scenario import check_errors, check_filters, check_tool_list, walk_every_tool
from tests.integrations.mcp_session import failed, ok, stdio_session


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    return {**base, "MEMSTACK_DATA_DIR": str(tmp_path / "data"), "MEMSTACK_EMBEDDER": "hashing", **extra}


def test_stdio_server_with_a_configured_user_serves_every_tool(tmp_path: Path) -> None:
    env = server_env(tmp_path, MEMSTACK_MCP_ALLOW_ERASE="true")

    async def scenario() -> None:
        async with stdio_session(sys.executable, ["-m", "memstack", "mcp", "--user", "ann"], env) as session:
            await check_tool_list(session, erase=True)
            await walk_every_tool(session, {})
            await check_errors(session, {})
            await check_filters(session, {})
            # Bound to ann: no tool takes a user, and erase_user erases ann.
            tools = (await session.list_tools()).tools
            assert all("user_id" not in t.input_schema["properties"] for t in tools)
            erased = ok(await session.call_tool("erase_user", {}))
            assert erased["erased"]["memories"] > 0
            assert ok(await session.call_tool("list_memories", {}))["memories"] == []

    anyio.run(scenario)


def test_stdio_server_without_a_user_takes_it_from_the_call_and_hides_erase(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(sys.executable, ["-m", "memstack", "mcp"], server_env(tmp_path)) as session:
            await check_tool_list(session, erase=False)
            assert "user_id is required" in failed(await session.call_tool("search_memories", {"query": "x"}))
            ok(await session.call_tool("add_memory", {"content": "I play the cello.", "user_id": "carl"}))
            found = ok(await session.call_tool("search_memories", {"query": "cello", "user_id": "carl"}))
            assert any("cello" in r["content"] for r in found["results"])

    anyio.run(scenario)
    # The tools wrote to this machine's store, as tenant MEMSTACK_DEFAULT_TENANT ("local"): the CLI sees it.
    from memstack.factory import build_service
    from memstack.settings import load_settings

    service = build_service(load_settings(data_dir=tmp_path / "data", embedder="hashing"))
    try:
        records, _ = service.list("local", "carl")
        assert [r.content for r in records if r.tier == "stm"] == ["I play the cello."]
    finally:
        service.close()
