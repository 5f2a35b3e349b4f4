"""The API Lambda handler: API Gateway event in, the same resolver, metrics flushed as EMF."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from memstack.settings import get_settings

from tests.api.conftest import rest_event

HANDLER = Path(__file__).resolve().parents[2] / "lambdas" / "api" / "handler.py"


class FakeContext:
    function_name = "memstack-api"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:memstack-api"
    aws_request_id = "52fdfc07-2182-154f-163f-5f0f9a621d72"
    log_group_name = "/aws/lambda/memstack-api"
    log_stream_name = "2026/11/29/[$LATEST]abc"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


@pytest.fixture
def handler_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("MEMSTACK_DATA_DIR", str(tmp_path / "lambda"))
    monkeypatch.setenv("MEMSTACK_EMBEDDER", "hashing")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    # The stack sets this to the name its alarms and dashboard read (stacks/constructs/compute.py).
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "memstack-api")
    get_settings.cache_clear()
    spec = importlib.util.spec_from_file_location("memstack_api_handler_under_test", HANDLER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    if module._resolver is not None:
        module._resolver.deps.service.close()
    get_settings.cache_clear()


def _iam_event(
    method: str, path: str, body: Any = None, query: dict[str, str] | None = None
) -> dict[str, Any]:
    event = rest_event(method, path, body=body, query=query, key=None)
    event["requestContext"]["identity"]["userArn"] = "arn:aws:sts::123456789012:assumed-role/Agent/s1"
    return event


def _emf_metrics(stdout: str) -> list[dict[str, Any]]:
    blobs = []
    for line in stdout.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            blobs.append(json.loads(line))
    return blobs


def test_handler_serves_routes_and_emits_retrieval_latency(
    handler_module: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = FakeContext()
    # Powertools keeps metrics in process-wide state: start from none (other tests add searches).
    handler_module.metrics.clear_metrics()
    capsys.readouterr()
    add = handler_module.handler(
        _iam_event(
            "POST",
            "/v1/memories",
            {"user_id": "alice", "infer": False, "messages": [{"role": "user", "content": "I keep bees."}]},
        ),
        ctx,
    )
    assert add["statusCode"] == 202
    ingested = [m for m in _emf_metrics(capsys.readouterr().out) if "MessagesIngested" in m]
    assert len(ingested) == 1 and ingested[0]["MessagesIngested"] in (1, [1.0], 1.0)
    assert ingested[0]["service"] == "memstack-api"  # the dimension the dashboard charts
    found = handler_module.handler(
        _iam_event("POST", "/v1/memories/search", {"user_id": "alice", "query": "bees"}), ctx
    )
    assert found["statusCode"] == 200
    assert json.loads(found["body"])["results"][0]["content"] == "I keep bees."
    metrics = _emf_metrics(capsys.readouterr().out)
    latency = [m for m in metrics if "RetrievalLatency" in m]
    assert len(latency) == 1
    directive = latency[0]["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "memstack"
    assert {"Name": "RetrievalLatency", "Unit": "Milliseconds"} in directive["Metrics"]
    value = latency[0]["RetrievalLatency"]
    values = value if isinstance(value, list) else [value]
    assert len(values) == 1 and values[0] >= 0


def test_handler_without_identity_is_401(handler_module: ModuleType) -> None:
    event = rest_event("GET", "/v1/memories", query={"user_id": "alice"}, key="dev-key")
    answer = handler_module.handler(event, FakeContext())
    assert answer["statusCode"] == 401
    assert json.loads(answer["body"])["error"]["code"] == "unauthorized"
