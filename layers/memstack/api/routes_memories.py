"""Routes over stored memories: add, list, read, edit, delete, history.

Every route takes the tenant from authentication (``app.tenant()``) and the
user from the request; a memory id that belongs to another tenant or user is
simply not found (404), so ids leak nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any
from zoneinfo import ZoneInfo

from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from aws_lambda_powertools.metrics import MetricUnit

from memstack.api.errors import error_responses
from memstack.api.filters import conditions, metadata_query, where_query
from memstack.api.idempotency import make_idempotent
from memstack.api.limits import check_add, check_times, check_update
from memstack.api.responses import json_response as _json
from memstack.api.schemas import (
    AGENT_FILTER,
    ID_PATTERN,
    SESSION_MODE,
    AddMemoriesRequest,
    AddMemoriesResponse,
    DeleteMemoriesResponse,
    DeleteMemoryResponse,
    ExpiryFields,
    Memory,
    MemoryHistory,
    MemoryList,
    MemorySources,
    RestoreMemoryRequest,
    SessionMode,
    UpdateMemoryRequest,
)
from memstack.domain import expiry, filter_expr
from memstack.errors import ValidationFailed
from memstack.models import (
    CATEGORY_PATTERN,
    Kind,
    ListOrder,
    MemoryFilters,
    MemoryRecord,
    Message,
    Scope,
    Tier,
)
from memstack.service import Expiry
from memstack.settings import Settings

if TYPE_CHECKING:
    from memstack.api.app import ApiDeps, MemstackResolver

UserIdQuery = Annotated[str, Query(min_length=1, max_length=128, pattern=ID_PATTERN, description="the user")]
MemoryIdPath = Annotated[str, Path(min_length=1, max_length=200)]
LIST_PARAMS = frozenset(
    {
        "user_id",
        "cursor",
        "limit",
        "kind",
        "category",
        "scope",
        "tier",
        "after",
        "before",
        "session_id",
        "run_id",
        "session_mode",
        "agent_id",
        "metadata",
        "where",
        "include_superseded",
        "order",
    }
)
MAX_LIST_LIMIT = 1000


def aware(value: datetime | None, timezone: str) -> datetime | None:
    """Naive timestamps are in the configured timezone (``MEMSTACK_TIMEZONE``)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=ZoneInfo(timezone))


# Bookkeeping the system keeps in metadata that is no caller's business: the extraction
# operation's idempotency key.
INTERNAL_METADATA_KEYS = frozenset({"op_key"})


def memory_out(record: MemoryRecord) -> dict[str, Any]:
    data = record.public_dict()
    metadata = {k: v for k, v in data["metadata"].items() if k not in INTERNAL_METADATA_KEYS}
    return Memory.model_validate(
        {
            **data,
            "metadata": metadata,
            "agent_id": metadata.get("agent_id"),
            "expires_at": expiry.expires_at(record),
        }
    ).model_dump(mode="json")


def deadline(req: ExpiryFields, settings: Settings, now: datetime) -> datetime | None:
    """The expiry a request asks for; one already past is a 422 (it would store what no one can read)."""
    when = expiry.deadline(now, aware(req.expires_at, settings.timezone), req.ttl)
    if when is not None and when <= now:
        raise ValidationFailed(
            "expires_at is not in the future",
            [{"field": "expires_at", "location": "body", "message": "must be in the future", "type": "past"}],
        )
    return when


def reject_unknown_query(app: MemstackResolver, allowed: frozenset[str]) -> None:
    unknown = sorted(set(app.current_event.query_string_parameters or {}) - allowed)
    if unknown:
        raise ValidationFailed(
            f"unknown query parameter {unknown[0]!r}",
            [
                {
                    "field": name,
                    "location": "query",
                    "message": "unknown query parameter",
                    "type": "extra_forbidden",
                }
                for name in unknown
            ],
        )


def one_session(session_id: str | None, run_id: str | None) -> str | None:
    """``run_id`` is an alias of ``session_id`` (Mem0's name); both at once must agree."""
    if session_id and run_id and session_id != run_id:
        raise ValidationFailed("run_id is an alias of session_id: send one of them (or the same value)")
    return session_id or run_id


def register(app: MemstackResolver, deps: ApiDeps) -> None:
    service, settings = deps.service, deps.settings

    def do_add(*, request: dict[str, Any]) -> dict[str, Any]:
        """Store the whole (already validated) request; returns the JSON answer."""
        req = AddMemoriesRequest.model_validate(request["body"])
        messages = [
            Message(
                **m.model_dump(exclude_none=True, exclude={"timestamp"}),
                timestamp=aware(m.timestamp, settings.timezone),
            )
            for m in req.messages
        ]
        result = service.add(
            request["tenant"],
            req.user_id,
            messages,
            session_id=req.session_id,
            scope=req.scope,
            infer=req.infer,
            sync=req.sync,
            # The agent and the expiry ride in the metadata: every store keeps it, extraction carries it on.
            metadata=expiry.with_expiry(
                {**(req.metadata or {}), **({"agent_id": req.agent_id} if req.agent_id else {})},
                deadline(req, settings, datetime.now(UTC)),
            )
            or None,
        )
        status = "processed" if result.processed else "queued" if result.queued else "stored"
        # Newly stored only: an idempotent replay or a resent id is not new traffic.
        deps.metrics.add_metric(name="MessagesIngested", unit=MetricUnit.Count, value=len(result.stored))
        return AddMemoriesResponse(
            accepted=result.accepted,
            stored=result.stored,
            queued=result.queued,
            status=status,
            job_ids=result.job_ids,
        ).model_dump(mode="json")

    idempotent_add = make_idempotent(do_add, deps.persistence, deps.idempotency)

    @app.post(
        "/v1/memories",
        summary="Add conversation messages",
        tags=["memories"],
        responses={
            200: {
                "description": "stored and extracted (sync=true)",
                "content": {"application/json": {"model": AddMemoriesResponse}},
            },
            202: {
                "description": "every message is durably stored; extraction is queued",
                "content": {"application/json": {"model": AddMemoriesResponse}},
            },
            **error_responses(400, 401, 409, 413, 422),
        },
    )
    def add_memories(
        body: Annotated[AddMemoriesRequest, Body()],
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                min_length=1,
                max_length=255,
                pattern=r"^[\x21-\x7e]+$",
                description="a retried request with the same key and body creates nothing twice",
            ),
        ] = None,
    ):
        check_add(body, settings)
        tenant = app.tenant()
        request = {"tenant": tenant, "key": idempotency_key, "body": body.model_dump(mode="json")}
        if idempotency_key is None:
            answer = do_add(request=request)
        else:
            answer = idempotent_add(request=request)
        # 200 when the work is done (sync and extracted), 202 when some of it is still queued.
        return _json(200 if answer["status"] == "processed" else 202, answer)

    @app.get(
        "/v1/memories",
        summary="List a user's current memories, newest first (by write or event time)",
        tags=["memories"],
        responses={
            200: {
                "description": "a page of memories",
                "content": {"application/json": {"model": MemoryList}},
            },
            **error_responses(400, 401, 422),
        },
    )
    def list_memories(
        user_id: UserIdQuery,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 50,
        kind: Annotated[Kind | None, Query()] = None,
        category: Annotated[str | None, Query(max_length=40, pattern=CATEGORY_PATTERN)] = None,
        scope: Annotated[Scope | None, Query()] = None,
        tier: Annotated[Tier | None, Query()] = None,
        after: Annotated[datetime | None, Query()] = None,
        before: Annotated[datetime | None, Query()] = None,
        session_id: Annotated[str | None, Query(max_length=128, pattern=ID_PATTERN)] = None,
        run_id: Annotated[
            str | None, Query(max_length=128, pattern=ID_PATTERN, description="an alias of session_id")
        ] = None,
        session_mode: Annotated[SessionMode, Query(description=SESSION_MODE)] = "only",
        agent_id: Annotated[
            str | None, Query(max_length=128, pattern=ID_PATTERN, description=AGENT_FILTER)
        ] = None,
        metadata: Annotated[
            str | None,
            Query(
                max_length=8192,
                description='a metadata filter as JSON, as in search: {"topic":"food"} (equality), '
                '{"topic":{"in":["food","travel"]}} (any of them), {"n":{"gt":3}} (any operator); '
                "every key must match",
            ),
        ] = None,
        where: Annotated[
            str | None,
            Query(
                max_length=8192,
                description="a filter expression as JSON, as filters.where in search: "
                '{"OR":[{"kind":"event"},{"created_at":{"gte":"2026-01-01T00:00:00Z"}}]}',
            ),
        ] = None,
        include_superseded: Annotated[
            bool, Query(description="older versions too (tombstones never show; history has them)")
        ] = False,
        order: Annotated[
            ListOrder,
            Query(
                description="newest first by when each memory was written (created_at), or by when "
                "what it says happened (event_time; created_at when it has none, as after/before "
                "compare); a cursor continues the order it came from"
            ),
        ] = "created_at",
    ):
        reject_unknown_query(app, LIST_PARAMS)
        check_times(settings, "query", after=after, before=before)
        session_id = one_session(session_id, run_id)
        plain_metadata, metadata_ops = conditions(metadata_query(metadata), agent_id, field="metadata")
        filters = MemoryFilters(
            kind=kind,
            category=category,
            scope=scope,
            tier=tier,
            session_id=session_id,
            session_only=session_mode == "only",
            after=aware(after, settings.timezone),
            before=aware(before, settings.timezone),
            metadata=plain_metadata,
            where=filter_expr.both(where_query(where), metadata_ops),
            include_superseded=include_superseded,
        )
        records, next_cursor = service.list(app.tenant(), user_id, filters, limit, cursor or None, order)
        return _json(200, {"memories": [memory_out(r) for r in records], "next_cursor": next_cursor})

    @app.get(
        "/v1/memories/<memory_id>",
        summary="Read one memory",
        tags=["memories"],
        responses={
            200: {"description": "the memory", "content": {"application/json": {"model": Memory}}},
            **error_responses(401, 404, 422),
        },
    )
    def get_memory(memory_id: MemoryIdPath, user_id: UserIdQuery):
        reject_unknown_query(app, frozenset({"user_id"}))
        return _json(200, memory_out(service.get(app.tenant(), user_id, memory_id)))

    @app.patch(
        "/v1/memories/<memory_id>",
        summary="Edit a memory (writes a new version)",
        tags=["memories"],
        responses={
            200: {"description": "the new version", "content": {"application/json": {"model": Memory}}},
            **error_responses(400, 401, 404, 409, 413, 422),
        },
    )
    def update_memory(memory_id: MemoryIdPath, body: Annotated[UpdateMemoryRequest, Body()]):
        check_update(body, settings)
        expires = None
        if {"expires_at", "ttl"} & body.model_fields_set:
            expires = Expiry(deadline(body, settings, datetime.now(UTC)))
        record = service.update(
            app.tenant(), body.user_id, memory_id, body.content, metadata=body.metadata, expires=expires
        )
        return _json(200, memory_out(record))

    @app.delete(
        "/v1/memories",
        summary="Delete every current memory of a user from one agent and/or one session (run)",
        tags=["memories"],
        responses={
            200: {
                "description": "what was deleted",
                "content": {"application/json": {"model": DeleteMemoriesResponse}},
            },
            **error_responses(401, 422),
        },
    )
    def delete_memories(
        user_id: UserIdQuery,
        agent_id: Annotated[
            str | None, Query(max_length=128, pattern=ID_PATTERN, description="only this agent's memories")
        ] = None,
        session_id: Annotated[
            str | None, Query(max_length=128, pattern=ID_PATTERN, description="only this session's memories")
        ] = None,
        run_id: Annotated[
            str | None, Query(max_length=128, pattern=ID_PATTERN, description="an alias of session_id")
        ] = None,
    ):
        reject_unknown_query(app, frozenset({"user_id", "agent_id", "session_id", "run_id"}))
        session_id = one_session(session_id, run_id)
        if not (agent_id or session_id):
            # Every memory of the user is an erasure, which has its own route (and removes the raw turns too).
            raise ValidationFailed(
                "give agent_id and/or session_id (run_id); to delete all of a user: DELETE /v1/users/{id}",
                [
                    {
                        "field": "agent_id",
                        "location": "query",
                        "message": "agent_id or session_id is required",
                        "type": "missing",
                    }
                ],
            )
        filters = MemoryFilters(
            session_id=session_id,
            session_only=session_id is not None,
            metadata=conditions(None, agent_id, field="metadata")[0],
        )
        ids = service.delete_matching(app.tenant(), user_id, filters)
        return _json(200, {"deleted": len(ids), "ids": ids})

    @app.delete(
        "/v1/memories/<memory_id>",
        summary="Delete a memory (writes a tombstone version)",
        tags=["memories"],
        responses={
            200: {"description": "deleted", "content": {"application/json": {"model": DeleteMemoryResponse}}},
            **error_responses(401, 404, 409, 422),
        },
    )
    def delete_memory(memory_id: MemoryIdPath, user_id: UserIdQuery):
        reject_unknown_query(app, frozenset({"user_id"}))
        tombstone = service.delete(app.tenant(), user_id, memory_id)
        return _json(
            200,
            {"id": memory_id, "deleted": True, "tombstone_id": tombstone.id, "version": tombstone.version},
        )

    @app.get(
        "/v1/memories/<memory_id>/history",
        summary="The version chain of a memory, oldest first",
        tags=["memories"],
        responses={
            200: {"description": "versions", "content": {"application/json": {"model": MemoryHistory}}},
            **error_responses(401, 404, 422),
        },
    )
    def memory_history(memory_id: MemoryIdPath, user_id: UserIdQuery):
        reject_unknown_query(app, frozenset({"user_id"}))
        chain = service.history(app.tenant(), user_id, memory_id)
        return _json(200, {"memories": [memory_out(r) for r in chain]})

    @app.get(
        "/v1/memories/<memory_id>/sources",
        summary="The conversation turns a memory was made from",
        tags=["memories"],
        responses={
            200: {
                "description": "its source turns",
                "content": {"application/json": {"model": MemorySources}},
            },
            **error_responses(401, 404, 422),
        },
    )
    def memory_sources(memory_id: MemoryIdPath, user_id: UserIdQuery):
        reject_unknown_query(app, frozenset({"user_id"}))
        found = service.sources(app.tenant(), user_id, memory_id)
        sources = [{"message_id": m, "turn": memory_out(t) if t else None} for m, t in found]
        return _json(200, {"sources": sources})

    @app.post(
        "/v1/memories/<memory_id>/restore",
        summary="Make a version current again (undo a delete or an edit; writes a new version)",
        tags=["memories"],
        responses={
            200: {"description": "the new version", "content": {"application/json": {"model": Memory}}},
            **error_responses(400, 401, 404, 409, 422),
        },
    )
    def restore_memory(memory_id: MemoryIdPath, body: Annotated[RestoreMemoryRequest, Body()]):
        return _json(200, memory_out(service.restore(app.tenant(), body.user_id, memory_id)))
