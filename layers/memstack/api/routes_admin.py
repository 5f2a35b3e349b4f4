"""Per-user administration and liveness: erase a user, consolidate a user, health."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from memstack.api.errors import error_responses
from memstack.api.openapi import API_VERSION, PUBLIC
from memstack.api.responses import json_response
from memstack.api.routes_memories import reject_unknown_query
from memstack.api.schemas import (
    ID_PATTERN,
    ConsolidationRequest,
    ConsolidationResponse,
    EraseUserResponse,
    HealthResponse,
    UserList,
)
from memstack.domain.consolidation.status import BUSY
from memstack.errors import Conflict

#: users per page at most: each one's counts are an aggregate over its records
MAX_USERS_LIMIT = 200

if TYPE_CHECKING:
    from memstack.api.app import ApiDeps, MemstackResolver


def register(app: MemstackResolver, deps: ApiDeps) -> None:
    service, settings = deps.service, deps.settings

    @app.get(
        "/v1/users",
        summary="List this tenant's users, with counts per tier and the time of the last write",
        tags=["users"],
        responses={
            200: {"description": "a page of users", "content": {"application/json": {"model": UserList}}},
            **error_responses(400, 401, 422),
        },
    )
    def list_users(
        cursor: Annotated[str | None, Query(max_length=512)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_USERS_LIMIT)] = 50,
    ):
        reject_unknown_query(app, frozenset({"cursor", "limit"}))
        page, next_cursor = service.users(app.tenant(), limit, cursor or None)
        users = [
            {
                "user_id": u.user_id,
                "counts": {"stm": u.stm, "ltm": u.ltm},
                "last_write": u.last_write.isoformat() if u.last_write else None,
            }
            for u in page
        ]
        return json_response(200, {"users": users, "next_cursor": next_cursor})

    @app.delete(
        "/v1/users/<user_id>",
        summary="Erase everything stored for a user in this tenant",
        tags=["users"],
        responses={
            200: {
                "description": "what was erased",
                "content": {"application/json": {"model": EraseUserResponse}},
            },
            **error_responses(401, 422),
        },
    )
    def erase_user(user_id: Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN)]):
        tenant = app.tenant()
        counts = service.erase_user(tenant, user_id)
        # Recorded Idempotency-Key answers list the user's message ids: they go too.
        forget = getattr(deps.persistence, "erase_user", None)
        if forget is not None:
            counts["idempotency"] = forget(tenant, user_id)
        return json_response(200, {"user_id": user_id, "erased": counts})

    @app.post(
        "/v1/consolidations",
        summary="Consolidate one user's short-term memory (run now or enqueue)",
        tags=["consolidation"],
        responses={
            200: {
                "description": "ran (sync=true): what was read and written",
                "content": {"application/json": {"model": ConsolidationResponse}},
            },
            202: {
                "description": "enqueued (sync=false)",
                "content": {"application/json": {"model": ConsolidationResponse}},
            },
            **error_responses(400, 401, 409, 413, 422),
        },
    )
    def consolidate(body: Annotated[ConsolidationRequest, Body()]):
        report = service.consolidate(app.tenant(), body.user_id, sync=body.sync)
        if report["status"] == BUSY:
            raise Conflict(
                f"a consolidation of user {body.user_id} is already running; retry when it has finished"
            )
        # The tenant is the caller's own; answers never echo it (ids and counts only).
        report = {k: v for k, v in report.items() if k != "tenant"}
        answer = ConsolidationResponse.model_validate({**report, "user_id": body.user_id})
        return json_response(200 if body.sync else 202, answer.model_dump(mode="json"))

    @app.get(
        "/v1/health",
        summary="Liveness and the configured backends",
        tags=["system"],
        responses={200: {"description": "alive", "content": {"application/json": {"model": HealthResponse}}}},
        openapi_extensions=PUBLIC,
    )
    def health():
        backends = {
            "store": settings.store_backend,
            "stm": settings.stm_backend,
            "queue": settings.queue_backend,
            "embedder": settings.embedder,
            "reranker": settings.reranker,
            "llm": settings.llm,
            "idempotency": "dynamodb" if settings.aws.idempotency_table else "embedded",
        }
        return json_response(200, {"status": "ok", "version": API_VERSION, "backends": backends})
