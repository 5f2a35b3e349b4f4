"""Fixtures for the REST API: the resolver over the embedded service, events, and a live local server."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memstack.api.app import MemstackResolver, close_app, create_app
from memstack.api.auth import ApiKeyAuthenticator, Authenticator
from memstack.api.wsgi_server import make_server, running_in_thread
from memstack.factory import build_service
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

EVENT_TEMPLATE = json.loads((Path(__file__).parent / "events" / "rest_proxy_event.json").read_text())
# Two tenants: a memory of tenant "acme" must never be reachable with tenant "globex"'s key.
KEYS = {"acme-key": "acme", "globex-key": "globex"}


def rest_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    key: str | None = "acme-key",
) -> dict[str, Any]:
    """An API Gateway REST proxy event (the AWS sample event) for this request."""
    event = copy.deepcopy(EVENT_TEMPLATE)
    event["httpMethod"] = method
    event["path"] = path
    event["resource"] = path
    event["requestContext"]["path"] = f"/prod{path}"
    event["requestContext"]["httpMethod"] = method
    hdrs = dict(event["headers"])
    if key is not None:
        hdrs["X-Api-Key"] = key
    hdrs.update(headers or {})
    event["headers"] = hdrs
    event["multiValueHeaders"] = {k: [v] for k, v in hdrs.items()}
    event["queryStringParameters"] = query or None
    event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
    event["body"] = body if body is None or isinstance(body, str) else json.dumps(body)
    return event


class Api:
    """Calls the resolver the way API Gateway would and decodes the answer."""

    def __init__(self, app: MemstackResolver) -> None:
        self.app = app

    def __call__(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        result = self.app.resolve(rest_event(method, path, **kwargs), None)
        body = result["body"]
        return result["statusCode"], json.loads(body) if body else None


def build_api(service: MemoryService, settings: Settings, authenticator: Authenticator | None = None) -> Api:
    return Api(create_app(service, settings, authenticator or ApiKeyAuthenticator(KEYS)))


@pytest.fixture
def api(service: MemoryService, settings: Settings) -> Iterator[Api]:
    client = build_api(service, settings)
    yield client
    close_app(client.app)


@pytest.fixture
def small_limits(tmp_path: Path) -> Settings:
    """Tight limits so each limit is easy to cross."""
    return load_settings(
        data_dir=tmp_path / "small",
        embedder="hashing",
        max_message_chars=50,
        max_messages_per_request=3,
        max_query_chars=20,
        max_top_k=5,
        max_body_bytes=2048,
    )


@pytest.fixture
def small_api(small_limits: Settings) -> Iterator[Api]:
    service = build_service(small_limits)
    client = build_api(service, small_limits)
    yield client
    close_app(client.app)
    service.close()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[str]:
    """The real local server (waitress, several threads) on a free loopback port; yields its base URL."""
    settings = load_settings(
        data_dir=tmp_path / "live",
        embedder="hashing",
        api_keys="acme-key=acme,globex-key=globex",
        max_body_bytes=64 * 1024,
    )
    service = build_service(settings)
    server, api = make_server(service, settings, host="127.0.0.1", port=0, threads=4)
    try:
        with running_in_thread(server) as url:
            yield url
    finally:
        api.close()
        service.close()


def add_body(user_id: str = "alice", *contents: str, **extra: Any) -> dict[str, Any]:
    texts = contents or ("I moved to Lisbon last spring and I adopted a cat named Miso.",)
    return {"user_id": user_id, "messages": [{"role": "user", "content": t} for t in texts], **extra}
