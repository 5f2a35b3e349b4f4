"""The REST API of a ``MemoryService`` in this process, reached through ``MemoryClient``.

The MCP server, the LangGraph store and the agent tools all speak to memstack
through ``MemoryClient``. When the service runs in the same process (``memstack
mcp``, the ``/mcp`` endpoint of ``memstack serve``, a notebook), the client's
transport is the API's own WSGI app: the same validation, limits, errors and
answers as over the network, without a socket.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from memstack.api.wsgi_server import WsgiApi
from memstack.client.retry import NO_RETRIES
from memstack.client.sync import MemoryClient
from memstack.service import MemoryService
from memstack.settings import Settings

IN_PROCESS_URL = "http://memstack.in-process"
# The credential headers an in-process call forwards from the caller it acts for.
CREDENTIAL_HEADERS = ("authorization", "x-api-key")


class FixedTenant:
    """An ``Authenticator`` for a process that is one tenant (``memstack mcp`` over stdio).

    Only for in-process use: it accepts every request, so it must never face a network.
    """

    def __init__(self, tenant: str) -> None:
        self._tenant = tenant

    def tenant(self, event: Mapping[str, Any]) -> str:
        return self._tenant


def wsgi_api(service: MemoryService, settings: Settings, tenant: str | None = None) -> WsgiApi:
    """The API's WSGI app over ``service``; with ``tenant``, every call is that tenant's."""
    return WsgiApi(service, settings, authenticator=FixedTenant(tenant) if tenant else None)


def in_process_client(api: WsgiApi, headers: Mapping[str, str] | None = None) -> MemoryClient:
    """A ``MemoryClient`` whose requests go straight into ``api`` (no retries: nothing is in between)."""
    return MemoryClient(
        IN_PROCESS_URL, headers=headers, transport=httpx.WSGITransport(app=api), retry=NO_RETRIES
    )


def credentials_of(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The caller's credential headers (to act for that caller, with its tenant)."""
    return {k: v for k, v in (headers or {}).items() if k.lower() in CREDENTIAL_HEADERS}
