"""The clients' methods show their real parameters at runtime (help(), IDEs, notebooks, tool wrappers)."""

from __future__ import annotations

import inspect

import pytest
from memstack.client import AsyncMemoryClient, MemoryClient, calls


@pytest.mark.parametrize("client", [MemoryClient, AsyncMemoryClient])
@pytest.mark.parametrize("name", ["add", "search", "update", "history", "delete"])
def test_a_method_has_its_builders_parameters_after_self(client: type, name: str) -> None:
    builder = inspect.signature(getattr(calls, name))
    method = inspect.signature(getattr(client, name))
    assert list(method.parameters) == ["self", *builder.parameters]
    assert method.parameters["user_id"].kind is inspect.Parameter.KEYWORD_ONLY


def test_a_bound_method_shows_the_builders_signature() -> None:
    client = MemoryClient("http://127.0.0.1:9", api_key="k")
    try:
        shown = inspect.signature(client.search)
        assert shown == inspect.signature(calls.search)
        assert "query" in shown.parameters and "top_k" in shown.parameters
    finally:
        client.close()
