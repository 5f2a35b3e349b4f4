"""What the sync and async clients share: configuration, request building, answer handling.

The two differ only in how they send a request and how they wait; everything
else (auth, timeouts, the retry decision, the error mapping) is here once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from memstack.client.calls import ApiCall, jsonable, query_params
from memstack.client.errors import MemoryApiError, decode_answer
from memstack.client.retry import RetryPolicy, parse_retry_after
from memstack.client.sigv4 import SigV4Auth

DEFAULT_TIMEOUT = 30.0


def client_auth(api_key: str | None, aws_region: str | None, aws_credentials: Any) -> SigV4Auth | None:
    if api_key and aws_region:
        raise ValueError("use either api_key (local server) or aws_region (SigV4), not both")
    return SigV4Auth(aws_region, aws_credentials) if aws_region else None


def base_headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"Accept": "application/json", **(extra or {})}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def timeout_of(timeout: float | httpx.Timeout) -> httpx.Timeout:
    """One number is the limit of every phase (connect, read, write, pool) of one attempt."""
    return timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)


class ClientCore:
    """Builds the request of an ``ApiCall`` and decides what an answer or a failure means."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        aws_region: str | None,
        aws_credentials: Any,
        timeout: float | httpx.Timeout,
        retry: RetryPolicy | None,
        headers: Mapping[str, str] | None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        # What the httpx client of either kind is built with.
        self._http_options: dict[str, Any] = {
            "base_url": self.base_url,
            "auth": client_auth(api_key, aws_region, aws_credentials),
            "headers": base_headers(api_key, headers),
            "timeout": timeout_of(timeout),
        }

    def _request_args(self, call: ApiCall[Any]) -> dict[str, Any]:
        headers = dict(call.headers or {})
        content = call.content
        if content is not None:
            headers["Content-Type"] = call.content_type
        elif call.body is not None:
            content = json.dumps(jsonable(call.body)).encode()
            headers["Content-Type"] = "application/json"
        return {
            "method": call.method,
            "url": call.path,
            "params": query_params(call.query),
            "content": content,
            "headers": headers,
        }

    def _answer_or_delay(
        self, call: ApiCall[Any], attempt: int, response: httpx.Response
    ) -> tuple[Any, float | None]:
        """``(payload, None)`` when done; ``(None, delay)`` to retry; raises ``MemoryApiError``."""
        status = response.status_code
        if status < 400:
            return call.parse(decode_answer(status, response.headers, response.content, "")), None
        delay = self.retry.after_response(attempt, status, response.headers, call.idempotent)
        if delay is None:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            decode_answer(status, response.headers, response.content, response.reason_phrase, retry_after)
        return None, delay

    def _delay_after(self, call: ApiCall[Any], attempt: int, response: httpx.Response) -> float:
        """How long to wait before sending ``call`` again after an error answer; raises when not to."""
        _, delay = self._answer_or_delay(call, attempt, response)
        assert delay is not None  # an error answer either raised or is retried
        return delay

    def _delay_or_raise(self, call: ApiCall[Any], attempt: int, error: httpx.TransportError) -> float:
        delay = self.retry.after_error(attempt, error, call.idempotent)
        if delay is None:
            code = "timeout" if isinstance(error, httpx.TimeoutException) else "connection_error"
            raise MemoryApiError(0, code, f"could not reach {self.base_url}: {error!r}") from error
        return delay


def cut_off(response: httpx.Response, error: httpx.TransportError) -> MemoryApiError:
    """An answer that broke off while it was being read (the server stopped a streamed export)."""
    request_id = response.headers.get("x-request-id")
    return MemoryApiError(0, "connection_error", f"the answer was cut off: {error!r}", request_id=request_id)
