"""Fixtures for the agent-framework integrations: a live local server with /mcp, and toolkits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from memstack.api.wsgi_server import WsgiApi, make_server, running_in_thread
from memstack.client.in_process import in_process_client, wsgi_api
from memstack.client.sync import MemoryClient
from memstack.factory import build_service
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings


@dataclass
class LiveServer:
    url: str
    settings: Settings
    service: MemoryService
    api: WsgiApi


@pytest.fixture
def mcp_server(tmp_path: Path) -> Iterator[LiveServer]:
    """``memstack serve`` in this process (waitress, a free loopback port) with /mcp mounted."""
    from memstack.integrations.mcp_http import mount_mcp

    settings = load_settings(
        data_dir=tmp_path / "live",
        embedder="hashing",
        api_keys="acme-key=acme,globex-key=globex",
        mcp_allow_erase=True,
    )
    service = build_service(settings)
    server, api = make_server(service, settings, host="127.0.0.1", port=0, threads=4)
    endpoint = mount_mcp(api, settings)
    try:
        with running_in_thread(server) as url:
            yield LiveServer(url, settings, service, api)
    finally:
        endpoint.close()
        api.close()
        service.close()


@pytest.fixture
def local_client(service: MemoryService, settings: Settings) -> Iterator[MemoryClient]:
    """A ``MemoryClient`` over the service in this process (tenant ``local``)."""
    api = wsgi_api(service, settings, "local")
    client = in_process_client(api)
    yield client
    client.close()
    api.close()
