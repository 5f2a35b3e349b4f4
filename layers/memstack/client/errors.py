"""``MemoryApiError`` and the one place an HTTP answer becomes a payload or that error."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class MemoryApiError(Exception):
    """An error answer from the API (or no answer at all: ``code="connection_error"``).

    ``code`` is the API's machine-readable code (``not_found``, ``validation_error``,
    ``rate_limited`` ...), ``details`` name the offending fields, ``retry_after`` is
    the server's ``Retry-After`` in seconds when it sent one.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.request_id = request_id
        self.retry_after = retry_after


def decode_answer(
    status: int, headers: Mapping[str, str], content: bytes, reason: str, retry_after: float | None = None
) -> Any:
    """The decoded JSON of a success, or ``MemoryApiError`` for anything else."""
    request_id = headers.get("x-request-id") or headers.get("x-amzn-requestid")
    try:
        payload = json.loads(content) if content else {}
    except ValueError:
        payload = None
    if status >= 400:
        err = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(err, dict):
            raise MemoryApiError(
                status,
                str(err.get("code", "error")),
                str(err.get("message", "")),
                list(err.get("details") or []),
                request_id,
                retry_after,
            )
        # Not our shape: API Gateway itself refused (a missing SigV4 signature, its own throttling).
        message = payload.get("message") if isinstance(payload, dict) else None
        text = content[:500].decode("utf-8", "replace")
        raise MemoryApiError(
            status,
            "http_error",
            str(message or text or reason),
            request_id=request_id,
            retry_after=retry_after,
        )
    if payload is None:
        raise MemoryApiError(status, "invalid_response", "the answer is not JSON", request_id=request_id)
    return payload
