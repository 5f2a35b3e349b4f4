"""Every API call described once (method, path, body, query, answer model, idempotency).

``MemoryClient`` and ``AsyncMemoryClient`` turn these descriptions into HTTP
requests; neither repeats how a call's body is built or its answer parsed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from memstack.api.schemas import (
    AddMemoriesResponse,
    ConsolidationResponse,
    DeleteMemoriesResponse,
    DeleteMemoryResponse,
    EraseUserResponse,
    HealthResponse,
    ImportUserResponse,
    JobStatusResponse,
    Memory,
    MemoryHistory,
    MemoryList,
    SearchMemoriesResponse,
    TenantConfigResponse,
    UserList,
)

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class ApiCall(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    body: Any = None
    query: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    # Safe to send twice (a retry after a lost answer changes nothing).
    idempotent: bool = True
    #: a body that is not JSON (an export's lines), sent as it is with ``content_type``
    content: bytes | None = None
    content_type: str = "application/json"


class _Never:
    """``expires_at=NEVER`` in ``update``: remove the memory's expiry (sent as JSON ``null``)."""

    def __repr__(self) -> str:
        return "NEVER"


NEVER = _Never()


class Verbatim(dict[str, Any]):
    """A body sent exactly as given, ``null`` values included (a merge patch's "reset this key")."""


def jsonable(value: Any) -> Any:
    """Models, datetimes and mappings as plain JSON values; ``None`` fields are left out."""
    if value is NEVER:
        return None
    if isinstance(value, Verbatim):
        return dict(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True, by_alias=True)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def query_params(query: Mapping[str, Any] | None) -> dict[str, str]:
    """Query values as strings: booleans lower-case, mappings (metadata filters) as JSON."""
    out: dict[str, str] = {}
    for key, value in (query or {}).items():
        if value is None:
            continue
        value = jsonable(value)
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, dict | list):
            out[key] = json.dumps(value, separators=(",", ":"))
        else:
            out[key] = str(value)
    return out


def _model(model: type[ModelT]) -> Callable[[Any], ModelT]:
    return model.model_validate


def _segment(value: str) -> str:
    return quote(value, safe="")


def session_of(session_id: str | None, run_id: str | None) -> str | None:
    """``run_id`` (Mem0's name) is ``session_id``; both at once must agree."""
    if session_id and run_id and session_id != run_id:
        raise ValueError("run_id is an alias of session_id: pass one of them (or the same value)")
    return session_id or run_id


def metadata_filter(metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A metadata filter as given; a ``None`` value is refused here (JSON encoding would drop it)."""
    for key, value in (metadata or {}).items():
        if value is None:
            raise ValueError(
                f"metadata filter {key!r}: null matches nothing: filter on a string, number or boolean"
            )
    return metadata


def with_metadata(filters: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None) -> Any:
    """``filters`` with ``metadata`` as its metadata filter (given both ways, they must agree)."""
    if filters and filters.get("metadata") is not None:
        if metadata is not None and filters["metadata"] != metadata:
            raise ValueError("metadata is given twice (as metadata= and in filters): pass it once")
        metadata = filters["metadata"]
    if metadata is None:
        return filters
    return {**(filters or {}), "metadata": metadata_filter(metadata)}


def with_ids(messages: str | Sequence[Mapping[str, Any] | BaseModel]) -> list[dict[str, Any]]:
    """The messages as JSON objects, each with an id (a string is one user message).

    The client gives every message an id before the first attempt, so a retry
    after a lost answer stores nothing twice (the API keeps one copy per id).
    """
    items = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
    out = []
    for item in items:
        data = dict(jsonable(item))
        data.setdefault("id", uuid.uuid4().hex)
        out.append(data)
    return out


# ------------------------------------------------------------------------ the calls
def add(
    messages: str | Sequence[Mapping[str, Any] | BaseModel],
    *,
    user_id: str,
    session_id: str | None = None,
    run_id: str | None = None,
    agent_id: str | None = None,
    scope: str | None = None,
    infer: bool | None = None,
    sync: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    expires_at: datetime | None = None,
    ttl: int | None = None,
) -> ApiCall[AddMemoriesResponse]:
    """``expires_at`` / ``ttl`` (seconds): the memories of these messages are never returned after it."""
    body = {
        "expires_at": expires_at,
        "ttl": ttl,
        "user_id": user_id,
        "session_id": session_of(session_id, run_id),
        "agent_id": agent_id,
        "scope": scope,
        "messages": with_ids(messages),
        "infer": infer,
        "sync": sync,
        "metadata": metadata,
    }
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    return ApiCall("POST", "/v1/memories", _model(AddMemoriesResponse), body=body, headers=headers)


def search(
    query: str,
    *,
    user_id: str,
    top_k: int | None = None,
    session_id: str | None = None,
    run_id: str | None = None,
    session_mode: str | None = None,
    agent_id: str | None = None,
    filters: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    where: Mapping[str, Any] | None = None,
    reference_time: datetime | None = None,
    explain: bool | None = None,
    include_history: bool | None = None,
    min_score: float | None = None,
) -> ApiCall[SearchMemoriesResponse]:
    """``metadata`` is ``filters["metadata"]``: ``{"topic": "food"}``, ``{"topic": {"in": [...]}}``,
    ``{"n": {"gt": 3}}``; ``where`` is ``filters["where"]``: ``{"OR": [{"kind": "event"}, ...]}``."""
    if where is not None:
        if filters and filters.get("where") is not None and filters["where"] != where:
            raise ValueError("where is given twice (as where= and in filters): pass it once")
        filters = {**(filters or {}), "where": where}
    body = {
        "user_id": user_id,
        "query": query,
        "top_k": top_k,
        "session_id": session_of(session_id, run_id),
        "session_mode": session_mode,
        "agent_id": agent_id,
        "filters": with_metadata(filters, metadata),
        "reference_time": reference_time,
        "explain": explain,
        "include_history": include_history,
        "min_score": min_score,
    }
    return ApiCall("POST", "/v1/memories/search", _model(SearchMemoriesResponse), body=body)


def list_memories(
    *,
    user_id: str,
    limit: int | None = None,
    cursor: str | None = None,
    session_id: str | None = None,
    run_id: str | None = None,
    session_mode: str | None = None,
    agent_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    where: Mapping[str, Any] | None = None,
    order: str | None = None,
    **filters: Any,
) -> ApiCall[MemoryList]:
    """``filters``: kind, category, scope, tier, after, before; ``metadata``, ``where`` as in ``search``.

    ``order``: ``"created_at"`` (newest written first, the default) or ``"event_time"`` (newest
    event first); a ``next_cursor`` continues the order it came from.
    """
    query = {
        "user_id": user_id,
        "limit": limit,
        "cursor": cursor,
        "session_id": session_of(session_id, run_id),
        "session_mode": session_mode,
        "agent_id": agent_id,
        "metadata": metadata_filter(metadata),  # sent as JSON text (query_params)
        "where": where,
        "order": order,
        **filters,
    }
    return ApiCall("GET", "/v1/memories", _model(MemoryList), query=query)


def get(memory_id: str, *, user_id: str) -> ApiCall[Memory]:
    return ApiCall("GET", f"/v1/memories/{_segment(memory_id)}", _model(Memory), query={"user_id": user_id})


def update(
    memory_id: str,
    content: str | None = None,
    *,
    user_id: str,
    metadata: Mapping[str, Any] | None = None,
    expires_at: datetime | _Never | None = None,
    ttl: int | None = None,
) -> ApiCall[Memory]:
    """A new version: new ``content``, ``metadata`` (it replaces the caller's labels) and/or expiry.

    ``expires_at=NEVER`` removes the expiry; ``ttl`` is seconds from now.
    """
    # Not idempotent: a second PATCH after a lost answer would find the memory superseded (409).
    body = {
        "user_id": user_id,
        "content": content,
        "metadata": metadata,
        "expires_at": expires_at,
        "ttl": ttl,
    }
    return ApiCall(
        "PATCH", f"/v1/memories/{_segment(memory_id)}", _model(Memory), body=body, idempotent=False
    )


def delete(memory_id: str, *, user_id: str) -> ApiCall[DeleteMemoryResponse]:
    return ApiCall(
        "DELETE",
        f"/v1/memories/{_segment(memory_id)}",
        _model(DeleteMemoryResponse),
        query={"user_id": user_id},
        idempotent=False,
    )


def delete_all(
    *, user_id: str, agent_id: str | None = None, session_id: str | None = None, run_id: str | None = None
) -> ApiCall[DeleteMemoriesResponse]:
    """Delete every current memory of the user from this agent and/or session (Mem0's ``delete_all``)."""
    query = {"user_id": user_id, "agent_id": agent_id, "session_id": session_of(session_id, run_id)}
    return ApiCall("DELETE", "/v1/memories", _model(DeleteMemoriesResponse), query=query, idempotent=False)


def history(memory_id: str, *, user_id: str) -> ApiCall[list[Memory]]:
    def parse(payload: Any) -> list[Memory]:
        return MemoryHistory.model_validate(payload).memories

    return ApiCall("GET", f"/v1/memories/{_segment(memory_id)}/history", parse, query={"user_id": user_id})


def put_key(
    key: str,
    content: str,
    *,
    user_id: str,
    session_id: str | None = None,
    scope: str | None = None,
    kind: str | None = None,
    category: str | None = None,
    event_time: datetime | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> ApiCall[Memory]:
    """Write the memory named ``key`` directly (no extraction): version 1, or the next version."""
    body = {
        "user_id": user_id,
        "content": content,
        "session_id": session_id,
        "scope": scope,
        "kind": kind,
        "category": category,
        "event_time": event_time,
        "metadata": metadata,
    }
    # Idempotent in effect: writing the same content twice leaves the same current memory.
    return ApiCall("PUT", f"/v1/memories/keys/{_segment(key)}", _model(Memory), body=body)


def get_key(key: str, *, user_id: str) -> ApiCall[Memory]:
    return ApiCall("GET", f"/v1/memories/keys/{_segment(key)}", _model(Memory), query={"user_id": user_id})


def delete_key(key: str, *, user_id: str) -> ApiCall[DeleteMemoryResponse]:
    return ApiCall(
        "DELETE",
        f"/v1/memories/keys/{_segment(key)}",
        _model(DeleteMemoryResponse),
        query={"user_id": user_id},
        idempotent=False,
    )


def list_users(*, limit: int | None = None, cursor: str | None = None) -> ApiCall[UserList]:
    """A page of this tenant's users (by user id), each with counts per tier and its last write."""
    return ApiCall("GET", "/v1/users", _model(UserList), query={"limit": limit, "cursor": cursor})


def erase_user(user_id: str) -> ApiCall[EraseUserResponse]:
    return ApiCall("DELETE", f"/v1/users/{_segment(user_id)}", _model(EraseUserResponse))


NDJSON = "application/x-ndjson"
#: what one import request carries at most (the API's default body limit is 1 MiB)
IMPORT_REQUEST_BYTES = 512 * 1024


def export_user(
    user_id: str, *, cursor: str | None = None, limit: int | None = None, embeddings: bool | None = None
) -> ApiCall[Any]:
    """One request of an export (the clients' ``export_user`` reads its answer as lines)."""
    query = {"cursor": cursor, "limit": limit, "embeddings": embeddings}
    return ApiCall(
        "GET", f"/v1/users/{_segment(user_id)}/export", lambda p: p, query=query, headers={"Accept": NDJSON}
    )


def import_user(user_id: str, lines: str) -> ApiCall[ImportUserResponse]:
    """One request of an import: an export's header line and some of its records."""
    # Idempotent: the records keep their ids, so a request sent again skips what it wrote.
    return ApiCall(
        "POST",
        f"/v1/users/{_segment(user_id)}/import",
        _model(ImportUserResponse),
        content=lines.encode(),
        content_type=NDJSON,
    )


def import_requests(lines: Iterable[str], max_bytes: int = IMPORT_REQUEST_BYTES) -> Iterator[str]:
    """An export's lines as import request bodies of about ``max_bytes`` each, every one with the header.

    A record longer than that goes alone (the API answers 413 if it is over its own limit).
    """
    header: str | None = None
    batch: list[str] = []
    size = 0
    for raw in lines:
        line = raw.strip("\r\n")
        if not line.strip():
            continue
        if header is None:
            header = line
            continue
        if batch and size + len(line) + 1 > max_bytes:
            yield "\n".join([header, *batch]) + "\n"
            batch, size = [], 0
        batch.append(line)
        size += len(line.encode()) + 1
    if header is None:
        raise ValueError("the export is empty (no header line)")
    if batch:
        yield "\n".join([header, *batch]) + "\n"


def summed(user_id: str, answers: Iterable[ImportUserResponse]) -> ImportUserResponse:
    """The answers of an import's requests, added up."""
    total = ImportUserResponse(user_id=user_id, imported=0, skipped_existing=0, reembedded=0)
    for answer in answers:
        total.imported += answer.imported
        total.skipped_existing += answer.skipped_existing
        total.reembedded += answer.reembedded
    return total


def export_header_line(line: str) -> tuple[str, str | None]:
    """An export page's header line without its ``next_cursor``, and that cursor."""
    header = json.loads(line)
    cursor = header.pop("next_cursor", None)
    return json.dumps(header, ensure_ascii=False), cursor


def consolidate(user_id: str, *, sync: bool = False) -> ApiCall[ConsolidationResponse]:
    body = {"user_id": user_id, "sync": sync}
    return ApiCall("POST", "/v1/consolidations", _model(ConsolidationResponse), body=body)


def _version_header(if_version: int | None) -> dict[str, str] | None:
    return None if if_version is None else {"If-Match": f'"{if_version}"'}


def get_config() -> ApiCall[TenantConfigResponse]:
    """This tenant's configuration (custom categories, extraction instructions, webhooks) and its version."""
    return ApiCall("GET", "/v1/config", TenantConfigResponse.read_back)


def put_config(
    config: Mapping[str, Any] | BaseModel, *, if_version: int | None = None
) -> ApiCall[TenantConfigResponse]:
    """Replace the whole configuration (a section left out returns to its defaults).

    ``if_version``: refuse (412 ``precondition_failed``) if it is no longer at that version.
    """
    body = config.model_dump(mode="json") if isinstance(config, BaseModel) else Verbatim(config)
    return ApiCall(
        "PUT", "/v1/config", TenantConfigResponse.read_back, body=body, headers=_version_header(if_version)
    )


def patch_config(patch: Mapping[str, Any], *, if_version: int | None = None) -> ApiCall[TenantConfigResponse]:
    """Change parts of the configuration (JSON merge patch: ``None`` resets a key to its default)."""
    return ApiCall(
        "PATCH",
        "/v1/config",
        TenantConfigResponse.read_back,
        body=Verbatim(patch),
        headers=_version_header(if_version),
        # Merging the same patch twice leaves the same configuration.
        idempotent=True,
    )


def job(job_id: str) -> ApiCall[JobStatusResponse]:
    """One job's state (``queued``, ``running``, ``done``, ``failed`` with its ``error``); an add's
    ``job_ids`` name its jobs. Another tenant's, an unknown or a long-finished job: 404."""
    return ApiCall("GET", f"/v1/jobs/{_segment(job_id)}", _model(JobStatusResponse))


def health() -> ApiCall[HealthResponse]:
    return ApiCall("GET", "/v1/health", _model(HealthResponse))


def raw(
    method: str,
    path: str,
    *,
    body: Any = None,
    query: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    idempotent: bool | None = None,
) -> ApiCall[Any]:
    """Any route; the answer is the decoded JSON. Only reads are retried on an ambiguous failure."""
    safe = method.upper() in ("GET", "HEAD") if idempotent is None else idempotent
    return ApiCall(
        method.upper(), path, lambda p: p, body=body, query=query, headers=headers, idempotent=safe
    )
