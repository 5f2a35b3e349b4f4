"""The client signs API Gateway requests with SigV4 (service ``execute-api``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from memstack.client import MemoryApiError, MemoryClient


class RecordingSession(requests.Session):
    """Answers every request with a canned response and remembers what was sent."""

    def __init__(self, status: int, payload: Any) -> None:
        super().__init__()
        self.sent: list[dict[str, Any]] = []
        self.status, self.payload = status, payload

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.sent.append({"method": method, "url": url, **kwargs})
        response = requests.Response()
        response.status_code = self.status
        response._content = json.dumps(self.payload).encode()
        response.headers["Content-Type"] = "application/json"
        return response


BASE = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"


def _expected_signature(sent: dict[str, Any], credentials: Credentials) -> str:
    """Recompute the SigV4 signature the way API Gateway does, at the request's own timestamp."""
    headers = {k: v for k, v in sent["headers"].items() if k.lower() != "authorization"}
    request = AWSRequest(method=sent["method"], url=sent["url"], data=sent["data"], headers=headers)
    request.context["timestamp"] = headers["X-Amz-Date"]
    signer = SigV4Auth(credentials, "execute-api", "eu-west-1")
    canonical = signer.canonical_request(request)
    return signer.signature(signer.string_to_sign(request, canonical), request)


def test_requests_are_signed_for_execute_api() -> None:
    session = RecordingSession(202, {"accepted": ["m1"], "stored": ["m1"], "queued": 0, "status": "stored"})
    credentials = Credentials("AKIDEXAMPLE", "secret", token="session-token")
    client = MemoryClient(BASE, aws_region="eu-west-1", session=session, aws_credentials=credentials)
    answer = client.add(
        [{"id": "m1", "role": "user", "content": "hi"}], user_id="alice", idempotency_key="k1"
    )
    assert answer.accepted == ["m1"]
    sent = session.sent[0]
    headers = {k.lower(): v for k, v in sent["headers"].items()}
    auth = headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in auth
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "idempotency-key", "x-amz-security-token"} <= set(signed)
    assert headers["x-amz-security-token"] == "session-token"
    assert "api_key" not in headers and "x-api-key" not in headers
    assert sent["url"] == f"{BASE}/v1/memories"
    assert json.loads(sent["data"])["user_id"] == "alice"
    # The signature verifies over exactly what was sent (method, URL, headers, body).
    assert auth.split("Signature=")[1] == _expected_signature(sent, credentials)


def test_gateway_errors_without_our_shape_still_raise_with_a_code() -> None:
    session = RecordingSession(403, {"message": "Missing Authentication Token"})
    client = MemoryClient(
        BASE, aws_region="eu-west-1", session=session, aws_credentials=Credentials("AKIDEXAMPLE", "secret")
    )
    with pytest.raises(MemoryApiError) as err:
        client.health()
    assert err.value.status == 403 and err.value.code == "http_error"
    assert "Missing Authentication Token" in err.value.message


def test_api_key_and_sigv4_are_exclusive() -> None:
    with pytest.raises(ValueError, match="either"):
        MemoryClient(BASE, api_key="k", aws_region="eu-west-1")
