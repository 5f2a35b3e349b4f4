"""Retries of both clients: jittered backoff on 429/5xx/connection errors, Retry-After, timeouts."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import anyio
import httpx
import pytest
from memstack.client import AsyncMemoryClient, MemoryApiError, MemoryClient, RetryPolicy
from memstack.client.retry import parse_retry_after

LISTED = {"memories": [], "next_cursor": None}
MEMORY = {
    "id": "m2",
    "user_id": "ann",
    "scope": "USER",
    "tier": "ltm",
    "kind": "fact",
    "content": "x",
    "created_at": "2024-01-01T00:00:00Z",
    "is_current": True,
    "version": 2,
}
Step = httpx.Response | Exception


class Scripted:
    """A transport that answers from a script (a response, or an exception to raise) and records requests."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.sent: list[httpx.Request] = []

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def throttled(retry_after: str | None = None, status: int = 429) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = {"error": {"code": "rate_limited", "message": "slow down", "details": []}}
    return httpx.Response(status, json=body, headers=headers)


def policy(**kwargs: Any) -> RetryPolicy:
    return RetryPolicy(rng=random.Random(7), **kwargs)


class Harness:
    """The same call through ``MemoryClient`` or ``AsyncMemoryClient``; records the waits."""

    def __init__(self, kind: str, script: Scripted, retry: RetryPolicy | None = None, **kwargs: Any) -> None:
        self.kind, self.script, self.waits = kind, script, []
        retry = retry or policy()
        if kind == "sync":
            self.client: Any = MemoryClient(
                "http://memstack.test",
                api_key="k",
                transport=httpx.MockTransport(script.answer),
                retry=retry,
                sleep=self.waits.append,
                **kwargs,
            )
        else:

            async def answer(request: httpx.Request) -> httpx.Response:
                return script.answer(request)

            async def wait(seconds: float) -> None:
                self.waits.append(seconds)

            self.client = AsyncMemoryClient(
                "http://memstack.test",
                api_key="k",
                transport=httpx.MockTransport(answer),
                retry=retry,
                sleep=wait,
                **kwargs,
            )

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        bound: Callable[..., Any] = getattr(self.client, method)
        if self.kind == "sync":
            return bound(*args, **kwargs)

        async def run() -> Any:
            return await bound(*args, **kwargs)

        return anyio.run(run)


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_429_is_retried_after_the_servers_retry_after(kind: str) -> None:
    script = Scripted(throttled("2"), throttled("1"), httpx.Response(200, json=LISTED))
    call = Harness(kind, script)
    assert call("list", user_id="ann").memories == []
    assert len(script.sent) == 3
    # At least what the server asked for, plus a little jitter (at most a quarter of the backoff).
    assert 2.0 <= call.waits[0] <= 2.0 + 0.25 / 4
    assert 1.0 <= call.waits[1] <= 1.0 + 0.5 / 4


def test_503_backs_off_with_full_jitter_and_gives_up_after_max_attempts(kind: str) -> None:
    unavailable = httpx.Response(
        503, json={"error": {"code": "dependency_failed", "message": "x", "details": []}}
    )
    script = Scripted(*[unavailable] * 4)
    call = Harness(kind, script, retry=policy(max_attempts=4, base_delay=1.0, max_delay=3.0))
    with pytest.raises(MemoryApiError) as err:
        call("list", user_id="ann")
    assert err.value.status == 503 and err.value.code == "dependency_failed"
    assert len(script.sent) == 4 and len(call.waits) == 3
    for n, wait in enumerate(call.waits, start=1):
        assert 0.0 <= wait <= min(3.0, 1.0 * 2 ** (n - 1))
    assert len(set(call.waits)) == 3, "jitter: the waits are not a fixed schedule"


def test_a_retry_after_longer_than_the_limit_is_not_waited_for(kind: str) -> None:
    script = Scripted(throttled("3600"))
    call = Harness(kind, script, retry=policy(max_retry_after=30))
    with pytest.raises(MemoryApiError) as err:
        call("list", user_id="ann")
    assert err.value.status == 429 and err.value.retry_after == 3600.0
    assert len(script.sent) == 1 and call.waits == []


def test_ambiguous_failures_are_retried_only_for_idempotent_calls(kind: str) -> None:
    gateway_timeout = httpx.Response(504, json={"message": "Endpoint request timed out"})
    # A read: retried after a 504 and after a read timeout (the request may have run; reading again is safe).
    script = Scripted(gateway_timeout, httpx.ReadTimeout("slow"), httpx.Response(200, json=LISTED))
    assert Harness(kind, script)("list", user_id="ann").memories == []
    assert len(script.sent) == 3
    # An update: a 504 may hide an update that ran; sending it again would answer 409. Not retried.
    script = Scripted(gateway_timeout)
    with pytest.raises(MemoryApiError) as err:
        Harness(kind, script)("update", "m1", "new text", user_id="ann")
    assert err.value.status == 504 and len(script.sent) == 1
    script = Scripted(httpx.ReadTimeout("slow"))
    with pytest.raises(MemoryApiError) as timeout:
        Harness(kind, script)("update", "m1", "new text", user_id="ann")
    assert timeout.value.code == "timeout" and len(script.sent) == 1


def test_a_request_that_never_left_is_retried_whatever_it_is(kind: str) -> None:
    script = Scripted(httpx.ConnectError("refused"), httpx.Response(200, json=MEMORY))
    assert Harness(kind, script)("update", "m1", "x", user_id="ann").version == 2
    assert len(script.sent) == 2


def test_an_add_is_idempotent_because_every_message_gets_an_id_first(kind: str) -> None:
    added = {"accepted": ["?"], "stored": ["?"], "queued": 1, "status": "queued"}
    script = Scripted(httpx.ReadTimeout("lost answer"), httpx.Response(202, json=added))
    Harness(kind, script)("add", "I like tea.", user_id="ann")
    first, second = (json.loads(r.content) for r in script.sent)
    assert first == second, "the retry sends exactly the same messages, ids included"
    assert first["messages"][0]["id"] and first["messages"][0]["role"] == "user"


def test_client_errors_are_never_retried(kind: str) -> None:
    invalid = {
        "error": {"code": "validation_error", "message": "query: empty", "details": [{"field": "query"}]}
    }
    script = Scripted(httpx.Response(422, json=invalid))
    with pytest.raises(MemoryApiError) as err:
        Harness(kind, script)("search", "x", user_id="ann")
    assert err.value.code == "validation_error" and len(script.sent) == 1


def test_every_attempt_carries_the_timeout(kind: str) -> None:
    script = Scripted(httpx.Response(200, json=LISTED))
    Harness(kind, script, timeout=4.5)("list", user_id="ann")
    assert script.sent[0].extensions["timeout"] == {"connect": 4.5, "read": 4.5, "write": 4.5, "pool": 4.5}


def test_connection_errors_after_all_attempts_say_so(kind: str) -> None:
    script = Scripted(*[httpx.ConnectError("refused")] * 2)
    with pytest.raises(MemoryApiError) as err:
        Harness(kind, script, retry=policy(max_attempts=2))("health")
    assert err.value.status == 0 and err.value.code == "connection_error"
    assert "memstack.test" in err.value.message


def test_retry_after_parses_seconds_and_http_dates() -> None:
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_a_policy_must_try_at_least_once() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
