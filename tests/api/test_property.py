"""A bounded property-based run: schemathesis drives the API from its own OpenAPI document.

Requests go through the local server's WSGI adapter and the resolver (no
sockets): valid and invalid examples (schemathesis' positive and negative
generation) for every operation the document lists. Whatever it sends, the
API must never answer 5xx, and every error must have the one error shape.
(The schemathesis pytest plugin does not run under this pytest, so the
strategies are driven with Hypothesis directly.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from memstack.api.wsgi_server import WsgiApi
from memstack.factory import build_service
from memstack.settings import load_settings
from schemathesis import GenerationMode

AUTH = {"Authorization": "Bearer dev-key"}
EXAMPLES_PER_OPERATION = 12


@schemathesis.serializer("application/x-ndjson")
def _json_lines(ctx: Any, value: Any) -> bytes:
    """An import body (an export's lines) as generated: a string, or anything as its JSON."""
    return (value if isinstance(value, str) else json.dumps(value)).encode("utf-8", "surrogatepass")


@pytest.fixture
def openapi_schema(tmp_path: Path) -> Iterator[Any]:
    app_settings = load_settings(data_dir=tmp_path / "schemathesis", embedder="hashing")
    service = build_service(app_settings)
    api = WsgiApi(service, app_settings)
    yield schemathesis.openapi.from_wsgi("/openapi.json", api)
    api.close()
    service.close()


def _check(case: Any) -> None:
    response = case.call(headers=AUTH)
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"}, body
        assert {"code", "message", "details"} <= set(body["error"]), body


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_server_errors_and_one_error_shape(openapi_schema: Any, mode: GenerationMode) -> None:
    operations = [result.ok() for result in openapi_schema.get_all_operations()]
    assert len(operations) == 25  # every documented route is exercised
    exercised = 0
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            _check(case)

        try:
            run()
        except Unsatisfiable:
            # No invalid request exists for an operation without inputs (GET /v1/health).
            assert mode is GenerationMode.NEGATIVE and operation.path == "/v1/health"
            continue
        exercised += 1
    assert exercised >= 9
