"""``MemoryClient``: the memstack REST API from Python, with typed results.

Local server (API key)::

    client = MemoryClient("http://127.0.0.1:8000", api_key="dev-key")

API Gateway (IAM, requests signed with SigV4 for ``execute-api``)::

    client = MemoryClient("https://abc123.execute-api.eu-west-1.amazonaws.com/prod", aws_region="eu-west-1")

Every failure answer becomes a ``MemoryApiError`` carrying the API's error
``code`` (``not_found``, ``validation_error``, ...), the HTTP ``status`` and
the ``details`` that name the offending fields. Argument order follows Mem0's
client (``add(messages, user_id=...)``, ``search(query, user_id=...)``).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import requests
from pydantic import BaseModel

from memstack.api.schemas import (
    AddMemoriesResponse,
    ConsolidationResponse,
    DeleteMemoryResponse,
    EraseUserResponse,
    HealthResponse,
    Memory,
    MemoryHistory,
    MemoryList,
    SearchMemoriesResponse,
)

ModelT = TypeVar("ModelT", bound=BaseModel)


class MemoryApiError(Exception):
    """An error answer from the API (or no answer at all: ``code="connection_error"``)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.request_id = request_id


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


class MemoryClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        aws_region: str | None = None,
        aws_credentials: Any = None,
        timeout: float = 30.0,
        session: requests.Session | None = None,
    ) -> None:
        """``api_key`` for the local server; ``aws_region`` (and optional botocore credentials) for SigV4."""
        if api_key and aws_region:
            raise ValueError("use either api_key (local server) or aws_region (SigV4), not both")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.aws_region = aws_region
        self._credentials = aws_credentials
        self.timeout = timeout
        self.session = session or requests.Session()

    # ------------------------------------------------------------- transport
    def _signed_headers(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str]
    ) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.session import Session

        credentials = self._credentials
        if credentials is None:
            credentials = Session().get_credentials()
            if credentials is None:
                raise MemoryApiError(0, "unauthorized", "no AWS credentials found to sign the request")
            self._credentials = credentials
        request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
        SigV4Auth(credentials, "execute-api", self.aws_region).add_auth(request)
        return dict(request.headers.items())

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """One call; returns the decoded JSON answer or raises ``MemoryApiError``."""
        url = self.base_url + path
        params = {k: _jsonable(v) for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urlencode(params)
        data = json.dumps(_jsonable(body)).encode() if body is not None else None
        sent = {"Accept": "application/json", **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        if self.api_key:
            sent["Authorization"] = f"Bearer {self.api_key}"
        elif self.aws_region:
            sent = self._signed_headers(method, url, data, sent)
        try:
            response = self.session.request(method, url, data=data, headers=sent, timeout=self.timeout)
        except requests.RequestException as exc:
            raise MemoryApiError(0, "connection_error", f"could not reach {self.base_url}: {exc}") from exc
        request_id = response.headers.get("X-Request-Id") or response.headers.get("x-amzn-RequestId")
        try:
            payload = response.json() if response.content else {}
        except ValueError:
            payload = None
        if response.status_code >= 400:
            err = payload.get("error") if isinstance(payload, dict) else None
            if isinstance(err, dict):
                raise MemoryApiError(
                    response.status_code,
                    str(err.get("code", "error")),
                    str(err.get("message", "")),
                    list(err.get("details") or []),
                    request_id,
                )
            # Not our shape: API Gateway itself refused (for example a missing SigV4 signature).
            message = (payload or {}).get("message") if isinstance(payload, dict) else None
            raise MemoryApiError(
                response.status_code,
                "http_error",
                str(message or response.text[:500] or response.reason),
                request_id=request_id,
            )
        if payload is None:
            raise MemoryApiError(
                response.status_code, "invalid_response", "the answer is not JSON", request_id=request_id
            )
        return payload

    def _typed(self, model: type[ModelT], method: str, path: str, **kwargs: Any) -> ModelT:
        return model.model_validate(self.request(method, path, **kwargs))

    @staticmethod
    def _id(value: str) -> str:
        return quote(value, safe="")

    # --------------------------------------------------------------- the API
    def add(
        self,
        messages: str | Sequence[Mapping[str, Any] | BaseModel],
        *,
        user_id: str,
        session_id: str | None = None,
        scope: str | None = None,
        infer: bool | None = None,
        sync: bool | None = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> AddMemoriesResponse:
        """Store messages (a string is one user message); ``idempotency_key`` makes retries safe."""
        items = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
        body = {
            "user_id": user_id,
            "session_id": session_id,
            "scope": scope,
            "messages": items,
            "infer": infer,
            "sync": sync,
            "metadata": metadata,
        }
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._typed(AddMemoriesResponse, "POST", "/v1/memories", body=body, headers=headers)

    def search(
        self,
        query: str,
        *,
        user_id: str,
        top_k: int | None = None,
        session_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        reference_time: datetime | None = None,
        explain: bool | None = None,
        include_history: bool | None = None,
        min_score: float | None = None,
    ) -> SearchMemoriesResponse:
        body = {
            "user_id": user_id,
            "query": query,
            "top_k": top_k,
            "session_id": session_id,
            "filters": filters,
            "reference_time": reference_time,
            "explain": explain,
            "include_history": include_history,
            "min_score": min_score,
        }
        return self._typed(SearchMemoriesResponse, "POST", "/v1/memories/search", body=body)

    def list(
        self, *, user_id: str, limit: int | None = None, cursor: str | None = None, **filters: Any
    ) -> MemoryList:
        """One page of current memories, newest first; filters: kind, category, scope, tier, after, before."""
        query = {"user_id": user_id, "limit": limit, "cursor": cursor, **filters}
        return self._typed(MemoryList, "GET", "/v1/memories", query=query)

    def iter_memories(self, *, user_id: str, page_size: int = 100, **filters: Any) -> Iterator[Memory]:
        """Every current memory, following the cursor page by page."""
        cursor = None
        while True:
            page = self.list(user_id=user_id, limit=page_size, cursor=cursor, **filters)
            yield from page.memories
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def get(self, memory_id: str, *, user_id: str) -> Memory:
        return self._typed(Memory, "GET", f"/v1/memories/{self._id(memory_id)}", query={"user_id": user_id})

    def update(self, memory_id: str, content: str, *, user_id: str) -> Memory:
        """Edit a memory: the answer is the new version (its ``replaces_id`` is ``memory_id``)."""
        body = {"user_id": user_id, "content": content}
        return self._typed(Memory, "PATCH", f"/v1/memories/{self._id(memory_id)}", body=body)

    def delete(self, memory_id: str, *, user_id: str) -> DeleteMemoryResponse:
        return self._typed(
            DeleteMemoryResponse, "DELETE", f"/v1/memories/{self._id(memory_id)}", query={"user_id": user_id}
        )

    def history(self, memory_id: str, *, user_id: str) -> builtins.list[Memory]:
        """The version chain of a memory, oldest first."""
        chain = self._typed(
            MemoryHistory, "GET", f"/v1/memories/{self._id(memory_id)}/history", query={"user_id": user_id}
        )
        return chain.memories

    def erase_user(self, user_id: str) -> EraseUserResponse:
        return self._typed(EraseUserResponse, "DELETE", f"/v1/users/{self._id(user_id)}")

    def consolidate(self, user_id: str, *, sync: bool = False) -> ConsolidationResponse:
        return self._typed(
            ConsolidationResponse, "POST", "/v1/consolidations", body={"user_id": user_id, "sync": sync}
        )

    def health(self) -> HealthResponse:
        return self._typed(HealthResponse, "GET", "/v1/health")

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
