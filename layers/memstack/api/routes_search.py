"""``POST /v1/memories/search``: the retrieval pipeline, timed into the ``RetrievalLatency`` metric."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.metrics import MetricUnit

from memstack.api.errors import error_responses
from memstack.api.filters import conditions
from memstack.api.limits import check_search
from memstack.api.responses import json_response
from memstack.api.routes_memories import aware, memory_out
from memstack.api.schemas import SearchMemoriesRequest, SearchMemoriesResponse
from memstack.domain import filter_expr
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import MemoryFilters

if TYPE_CHECKING:
    from memstack.api.app import ApiDeps, MemstackResolver


def register(app: MemstackResolver, deps: ApiDeps) -> None:
    service, settings = deps.service, deps.settings

    @app.post(
        "/v1/memories/search",
        summary="Search a user's memories",
        tags=["search"],
        responses={
            200: {
                "description": "ranked memories",
                "content": {"application/json": {"model": SearchMemoriesResponse}},
            },
            **error_responses(400, 401, 413, 422),
        },
    )
    def search_memories(body: Annotated[SearchMemoriesRequest, Body()]):
        check_search(body, settings)
        tz = settings.timezone
        f = body.filters
        metadata, metadata_ops = conditions(
            f.metadata if f else None, body.agent_id, field="filters.metadata"
        )
        filters = MemoryFilters(
            session_id=body.session_id,
            session_only=body.session_mode == "only",
            metadata=metadata,
            where=filter_expr.both(f.where if f else None, metadata_ops),
            **(
                {}
                if f is None
                else {
                    "kind": f.kind,
                    "category": f.category,
                    "scope": f.scope,
                    "tier": f.tier,
                    "after": aware(f.after, tz),
                    "before": aware(f.before, tz),
                }
            ),
        )
        request = SearchRequest(
            tenant=app.tenant(),
            user_id=body.user_id,
            query=body.query,
            top_k=body.top_k,
            filters=filters,
            reference_time=aware(body.reference_time, tz),
            explain=body.explain,
            include_history=body.include_history,
            min_score=body.min_score,
        )
        started = time.perf_counter()
        result = service.search(request)
        deps.metrics.add_metric(
            name="RetrievalLatency",
            unit=MetricUnit.Milliseconds,
            value=(time.perf_counter() - started) * 1000,
        )
        results: list[dict[str, Any]] = []
        for hit in result.hits:
            item = {**memory_out(hit.record), "score": hit.score, "superseded": hit.superseded}
            if body.explain:
                item["stages"] = hit.stages
            results.append(item)
        answer: dict[str, Any] = {
            "results": results,
            "evidence": result.evidence,
            "degraded": list(result.degraded),
        }
        if body.explain:
            answer["explain"] = {
                "analysis": result.analysis,
                "stage_durations": result.stage_durations,
                "stage_status": result.stage_status,
            }
        return json_response(200, answer)
