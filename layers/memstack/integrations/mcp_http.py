"""``/mcp`` on ``memstack serve``: the SDK's streamable-HTTP app inside the WSGI server.

``memstack serve`` is a WSGI server (waitress); the MCP SDK's transport is an
ASGI app. ``a2wsgi`` runs the ASGI app for each WSGI request on one event loop
(a thread of its own), where the SDK's session manager runs too. The endpoint
is stateless with JSON answers (each POST is one JSON-RPC exchange), so it
needs no sticky sessions and scales with the server's threads. A stateless
endpoint has no stream to offer on GET (nor a session to DELETE): every method
but POST is 405 with ``Allow: POST``, as the transport's specification allows.
Handed to the SDK, a GET opened an event stream whose hop-by-hop ``Connection``
header the WSGI server refuses (a 500).

Authentication is the REST API's: ``WsgiApi.mount`` checks the credential
before a request reaches the SDK, and each tool call forwards that credential
to the in-process API, which derives the tenant from it exactly as for REST.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable
from typing import Any

from a2wsgi import ASGIMiddleware

from memstack.api.wsgi_server import StartResponse, WsgiApi
from memstack.client.in_process import in_process_client
from memstack.integrations.mcp_server import build_mcp_server
from memstack.integrations.toolkit import MemoryToolkit
from memstack.settings import Settings

MCP_PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class McpHttpEndpoint:
    """A WSGI app serving one ``MCPServer`` over streamable HTTP; ``close()`` stops its loop."""

    def __init__(self, toolkit: MemoryToolkit, settings: Settings, host: str = "127.0.0.1") -> None:
        server = build_mcp_server(toolkit, allow_erase=settings.mcp.mcp_allow_erase)
        # Host/Origin checks (DNS-rebinding protection) stay on for a loopback server; a server
        # bound to another interface is reached by names the SDK cannot know.
        app = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            json_response=True,
            stateless_http=True,
            host=host if host in LOOPBACK else "0.0.0.0",
        )
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(server, ready), name="memstack-mcp-loop", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout=60):
            raise RuntimeError("the MCP endpoint's event loop did not start")
        self._wsgi = ASGIMiddleware(app, loop=self._loop)  # type: ignore[arg-type]

    def _run(self, server: Any, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            self._stop = asyncio.Event()
            async with server.session_manager.run():
                ready.set()
                await self._stop.wait()

        # The session manager's task group lives as long as the endpoint; a2wsgi schedules
        # each request's ASGI call on the same loop.
        task = self._loop.create_task(serve())
        self._loop.run_until_complete(task)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method != "POST":
            return _not_allowed(method, start_response)
        return self._wsgi(environ, start_response)  # type: ignore[arg-type]

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)


def _not_allowed(method: str, start_response: StartResponse) -> Iterable[bytes]:
    """405 in the SDK's own JSON-RPC error shape (what its other refusals on ``/mcp`` look like)."""
    message = f"Method Not Allowed: {method}; this endpoint is stateless and takes JSON-RPC over POST only"
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    payload = json.dumps(error).encode()
    headers = [("Content-Type", "application/json"), ("Allow", "POST"), ("Content-Length", str(len(payload)))]
    start_response("405 Method Not Allowed", headers)
    return [] if method == "HEAD" else [payload]


def mount_mcp(api: WsgiApi, settings: Settings, host: str = "127.0.0.1") -> McpHttpEndpoint:
    """Serve MCP at ``/mcp`` of ``api``; tools call ``api`` itself with the caller's credential."""
    toolkit = MemoryToolkit(
        in_process_client(api), user_id=settings.mcp.mcp_user_id, agent_id=settings.mcp.mcp_agent_id
    )
    endpoint = McpHttpEndpoint(toolkit, settings, host)
    api.mount(MCP_PATH, endpoint)
    return endpoint
