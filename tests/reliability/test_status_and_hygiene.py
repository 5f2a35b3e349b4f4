"""Status codes the docs promise, and no user content in logs or traces (issue 12, items 7 and 8)."""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Metrics
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import Stubber
from memstack.adapters.llm.providers.bedrock_extractor import BedrockExtractor
from memstack.service import MemoryService
from memstack.settings import Settings

from tests.api.conftest import Api, build_api
from tests.api.test_errors import assert_error
from tests.api.test_lambda_handler import FakeContext, _iam_event, handler_module  # noqa: F401
from tests.extraction.test_bedrock_extractor import EXPECTED, MESSAGE, MODEL, TOKYO, tool_answer

SECRET = "my-bank-pin-is-4921"


def _memory(api: Api, user: str = "alice") -> dict[str, Any]:
    body = {"user_id": user, "infer": False, "messages": [{"role": "user", "content": "I live in Lisbon."}]}
    assert api("POST", "/v1/memories", body=body)[0] == 202
    return api("GET", "/v1/memories", query={"user_id": user})[1]["memories"][0]


def test_concurrent_patches_one_wins_the_rest_are_409(
    api: Api, service: MemoryService, settings: Settings
) -> None:
    memory = _memory(api)
    statuses: list[int] = []
    bodies: list[Any] = []
    # One resolver per thread, as the local server has (a resolver holds the request it resolves).
    clients = [build_api(service, settings) for _ in range(16)]
    start = threading.Barrier(16)

    def patch(i: int) -> None:
        start.wait()
        status, body = clients[i](
            "PATCH", f"/v1/memories/{memory['id']}", body={"user_id": "alice", "content": f"Now city {i}."}
        )
        statuses.append(status)
        bodies.append(body)

    threads = [threading.Thread(target=patch, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Counter(statuses) == {200: 1, 409: 15}, statuses
    winner = next(b for b in bodies if "version" in b)
    for body in bodies:
        if "error" in body:
            assert_error(409, body, 409, "conflict")
    # The losers' answer says where to retry: the winner is the current version.
    refused = [b for b in bodies if "error" in b and b["error"]["details"]]
    assert all(b["error"]["details"][0]["current_id"] == winner["id"] for b in refused)
    chain = api("GET", f"/v1/memories/{winner['id']}/history", query={"user_id": "alice"})[1]["memories"]
    assert [m["version"] for m in chain] == [1, 2]  # linear: exactly one edit applied


def test_edit_of_a_replaced_version_is_409_and_of_a_deleted_one_404(api: Api) -> None:
    memory = _memory(api)
    path = f"/v1/memories/{memory['id']}"
    status, new = api("PATCH", path, body={"user_id": "alice", "content": "I live in Porto."})
    assert status == 200
    status, body = api("PATCH", path, body={"user_id": "alice", "content": "I live in Faro."})
    assert_error(status, body, 409, "conflict")
    assert new["id"] in body["error"]["message"]
    assert api("DELETE", path, query={"user_id": "alice"})[0] == 409
    assert api("DELETE", f"/v1/memories/{new['id']}", query={"user_id": "alice"})[0] == 200
    status, body = api("PATCH", path, body={"user_id": "alice", "content": "I live in Faro."})
    assert_error(status, body, 404, "not_found")


class _Failing:
    """A stand-in for an AWS-backed port whose every call raises the given SDK error."""

    def __init__(self, real: Any, exc: Exception) -> None:
        self._real, self._exc = real, exc

    def __getattr__(self, name: str) -> Any:
        def fail(*_a: Any, **_k: Any) -> Any:
            raise self._exc

        return fail


THROTTLED = ClientError(
    {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "GetItem"
)
UNREACHABLE = EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com")


@pytest.mark.parametrize("exc", [THROTTLED, UNREACHABLE], ids=["throttled", "unreachable"])
def test_sdk_errors_a_store_lets_through_are_503(api: Api, service: MemoryService, exc: Exception) -> None:
    _memory(api)
    service.store = _Failing(service.store, exc)  # type: ignore[assignment]
    status, body = api("GET", "/v1/memories", query={"user_id": "alice"})
    assert_error(status, body, 503, "dependency_failed")
    assert "retry" in body["error"]["message"]


def test_bedrock_fallback_warning_holds_no_content(capsys: pytest.CaptureFixture[str]) -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    metrics = Metrics(namespace="memstack", service="hygiene-test")
    bad = {"operations": [{"op": "UPDATE", "content": f"Maya said {SECRET}"}]}  # no target_id: invalid
    # An invalid value is quoted in pydantic's error text: the kind here is the secret itself.
    worse = {"operations": [{"op": "ADD", "content": f"again {SECRET}", "kind": SECRET}]}
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer(bad), EXPECTED)
        stub.add_response("converse", tool_answer(worse), EXPECTED)
        ops = BedrockExtractor(MODEL, client=client, metrics=metrics, sleep=lambda _s: None).extract(
            MESSAGE, [], [TOKYO]
        )
    metrics.clear_metrics()
    assert [o.op for o in ops] == ["ADD"]
    logged = capsys.readouterr()
    assert "extraction_fallback" in logged.out + logged.err
    assert SECRET not in logged.out + logged.err


class _RecordingSubsegment:
    def __init__(self) -> None:
        self.metadata: list[tuple[str, Any]] = []

    def put_metadata(self, key: str, value: Any, namespace: str = "") -> None:
        self.metadata.append((key, value))

    def put_annotation(self, key: str, value: Any) -> None:
        pass


def test_api_tracer_records_no_response(handler_module, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    segment = _RecordingSubsegment()

    @contextmanager
    def in_subsegment(name: str):
        yield segment

    provider = handler_module.tracer.provider
    original = provider.in_subsegment
    provider.in_subsegment = in_subsegment
    try:
        body = {"user_id": "ann", "messages": [{"role": "user", "content": f"remember {SECRET}"}]}
        handler_module.handler(_iam_event("POST", "/v1/memories", body), FakeContext())
        answer = handler_module.handler(
            _iam_event("POST", "/v1/memories/search", {"user_id": "ann", "query": "what to remember"}),
            FakeContext(),
        )
    finally:
        provider.in_subsegment = original
    assert SECRET in answer["body"]  # the search found it ...
    assert all(SECRET not in repr(value) for _, value in segment.metadata)  # ... the trace did not keep it
    assert not any("response" in key for key, _ in segment.metadata)
    assert SECRET not in capsys.readouterr().out  # nor did the handler's logs
