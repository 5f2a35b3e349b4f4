"""The clients sign API Gateway requests with SigV4 (service ``execute-api``), every attempt afresh."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from memstack.client import AsyncMemoryClient, MemoryApiError, MemoryClient, RetryPolicy

BASE = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
ADDED = {"accepted": ["m1"], "stored": ["m1"], "queued": 0, "status": "stored"}


def _expected_signature(sent: httpx.Request, credentials: Credentials) -> str:
    """Recompute the SigV4 signature the way API Gateway does, at the request's own timestamp."""
    headers = {k: v for k, v in sent.headers.items() if k.lower() in _signed(sent)}
    request = AWSRequest(method=sent.method, url=str(sent.url), data=sent.content, headers=headers)
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(credentials, "execute-api", "eu-west-1")
    canonical = signer.canonical_request(request)
    return signer.signature(signer.string_to_sign(request, canonical), request)


def _signed(sent: httpx.Request) -> list[str]:
    return sent.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")


def test_requests_are_signed_for_execute_api() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(202, json=ADDED)

    credentials = Credentials("AKIDEXAMPLE", "secret", token="session-token")
    client = MemoryClient(
        BASE, aws_region="eu-west-1", aws_credentials=credentials, transport=httpx.MockTransport(answer)
    )
    answer_ = client.add(
        [{"id": "m1", "role": "user", "content": "hi"}], user_id="alice", idempotency_key="k1"
    )
    assert answer_.accepted == ["m1"]
    request = sent[0]
    auth = request.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in auth
    assert {"host", "x-amz-date", "idempotency-key", "x-amz-security-token"} <= set(_signed(request))
    assert request.headers["x-amz-security-token"] == "session-token"
    assert "x-api-key" not in request.headers
    assert str(request.url) == f"{BASE}/v1/memories"
    assert json.loads(request.content)["user_id"] == "alice"
    # The signature verifies over exactly what was sent (method, URL, headers, body).
    assert auth.split("Signature=")[1] == _expected_signature(request, credentials)


def test_a_retried_request_is_signed_again() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(503 if len(sent) == 1 else 200, json={"memories": [], "next_cursor": None})

    credentials = Credentials("AKIDEXAMPLE", "secret")
    client = MemoryClient(
        BASE,
        aws_region="eu-west-1",
        aws_credentials=credentials,
        transport=httpx.MockTransport(answer),
        sleep=lambda _: None,
    )
    client.list(user_id="alice", tier="ltm")
    assert len(sent) == 2
    for request in sent:
        assert request.headers["authorization"].split("Signature=")[1] == _expected_signature(
            request, credentials
        )


def test_the_async_client_signs_too() -> None:
    sent: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"status": "ok", "version": "0.1.0", "backends": {}})

    credentials = Credentials("AKIDEXAMPLE", "secret")

    async def call() -> None:
        async with AsyncMemoryClient(
            BASE, aws_region="eu-west-1", aws_credentials=credentials, transport=httpx.MockTransport(answer)
        ) as client:
            assert (await client.health()).status == "ok"

    anyio.run(call)
    assert sent[0].headers["authorization"].split("Signature=")[1] == _expected_signature(
        sent[0], credentials
    )


def test_gateway_errors_without_our_shape_still_raise_with_a_code() -> None:
    transport = httpx.MockTransport(
        lambda r: httpx.Response(403, json={"message": "Missing Authentication Token"})
    )
    client = MemoryClient(
        BASE,
        aws_region="eu-west-1",
        aws_credentials=Credentials("AKIDEXAMPLE", "secret"),
        transport=transport,
        retry=RetryPolicy(max_attempts=1),
    )
    with pytest.raises(MemoryApiError) as err:
        client.health()
    assert err.value.status == 403 and err.value.code == "http_error"
    assert "Missing Authentication Token" in err.value.message


def test_api_key_and_sigv4_are_exclusive() -> None:
    with pytest.raises(ValueError, match="either"):
        MemoryClient(BASE, api_key="k", aws_region="eu-west-1")
    with pytest.raises(ValueError, match="either"):
        AsyncMemoryClient(BASE, api_key="k", aws_region="eu-west-1")
