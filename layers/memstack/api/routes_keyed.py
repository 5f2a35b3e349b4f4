"""Keyed memories: ``PUT``/``GET``/``DELETE /v1/memories/keys/{key}`` (written directly, versioned)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from memstack.api.errors import error_responses
from memstack.api.limits import check_update
from memstack.api.responses import json_response
from memstack.api.routes_memories import UserIdQuery, aware, memory_out, reject_unknown_query
from memstack.api.schemas import (
    KEY_PATTERN,
    DeleteMemoryResponse,
    Memory,
    PutKeyedMemoryRequest,
    UpdateMemoryRequest,
)

if TYPE_CHECKING:
    from memstack.api.app import ApiDeps, MemstackResolver

KeyPath = Annotated[
    str, Path(min_length=1, max_length=200, pattern=KEY_PATTERN, description="your name for this memory")
]


def register(app: MemstackResolver, deps: ApiDeps) -> None:
    service, settings = deps.service, deps.settings

    @app.put(
        "/v1/memories/keys/<key>",
        summary="Write the memory named key (first version, or a new version of it)",
        tags=["memories"],
        responses={
            200: {"description": "a new version", "content": {"application/json": {"model": Memory}}},
            201: {"description": "the first version", "content": {"application/json": {"model": Memory}}},
            **error_responses(400, 401, 409, 413, 422),
        },
    )
    def put_keyed_memory(key: KeyPath, body: Annotated[PutKeyedMemoryRequest, Body()]):
        check_update(UpdateMemoryRequest(user_id=body.user_id, content=body.content), settings)
        record, created = service.put_key(
            app.tenant(),
            body.user_id,
            key,
            body.content,
            session_id=body.session_id,
            scope=body.scope,
            kind=body.kind,
            category=body.category,
            event_time=aware(body.event_time, settings.timezone),
            metadata=body.metadata,
        )
        return json_response(201 if created else 200, memory_out(record))

    @app.get(
        "/v1/memories/keys/<key>",
        summary="Read the current version of the memory named key",
        tags=["memories"],
        responses={
            200: {"description": "the memory", "content": {"application/json": {"model": Memory}}},
            **error_responses(401, 404, 422),
        },
    )
    def get_keyed_memory(key: KeyPath, user_id: UserIdQuery):
        reject_unknown_query(app, frozenset({"user_id"}))
        return json_response(200, memory_out(service.get_key(app.tenant(), user_id, key)))

    @app.delete(
        "/v1/memories/keys/<key>",
        summary="Delete the memory named key (a tombstone version; writing the key again revives it)",
        tags=["memories"],
        responses={
            200: {"description": "deleted", "content": {"application/json": {"model": DeleteMemoryResponse}}},
            **error_responses(401, 404, 409, 422),
        },
    )
    def delete_keyed_memory(key: KeyPath, user_id: UserIdQuery):
        reject_unknown_query(app, frozenset({"user_id"}))
        tombstone = service.delete_key(app.tenant(), user_id, key)
        answer = {
            "id": tombstone.replaces_id,
            "deleted": True,
            "tombstone_id": tombstone.id,
            "version": tombstone.version,
        }
        return json_response(200, answer)
