"""Drive an MCP server with the SDK's own ``ClientSession`` (stdio or streamable HTTP)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.client.session import ClientSession
from mcp_types import CallToolResult


@asynccontextmanager
async def http_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def stdio_session(command: str, args: list[str], env: dict[str, str]) -> AsyncIterator[ClientSession]:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def ok(result: CallToolResult) -> Any:
    """The structured answer of a successful call (and its text block says the same)."""
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content
    return result.structured_content


def failed(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return str(result.content[0].text)  # type: ignore[union-attr]
