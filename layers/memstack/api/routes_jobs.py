"""Background jobs of the caller's tenant: one job's state, what is still queued, dead-lettered, redrive."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from memstack.api.errors import error_responses
from memstack.api.responses import json_response
from memstack.api.routes_memories import reject_unknown_query
from memstack.api.schemas import (
    JobEntry,
    JobList,
    JobStatusResponse,
    RedriveRequest,
    RedriveResponse,
)
from memstack.ports.job_status import JobStatus

if TYPE_CHECKING:
    from memstack.api.app import ApiDeps, MemstackResolver


def job_out(entry: dict[str, Any], status: str | None = None) -> dict[str, Any]:
    """A queue's job entry as the API shows it: ids, type, status, attempts, error; never the payload."""
    job = entry.get("job")
    job = job if isinstance(job, dict) else {}
    return JobEntry.model_validate(
        {
            "id": str(entry["id"]),
            "type": str(job.get("type", "unknown")),
            "user_id": job.get("user_id"),
            "status": status or entry.get("status", "pending"),
            "attempts": int(entry.get("attempts") or 0),
            "error": entry.get("error"),
        }
    ).model_dump(mode="json")


def status_out(status: JobStatus) -> dict[str, Any]:
    """A job's recorded state as the API shows it (the tenant is the caller's own)."""
    return JobStatusResponse.model_validate(
        {
            **status.model_dump(exclude={"tenant", "state", "error"}),
            "status": status.state,
            "error": status.error.model_dump() if status.error else None,
        }
    ).model_dump(mode="json")


def register(app: MemstackResolver, deps: ApiDeps) -> None:
    service = deps.service

    @app.get(
        "/v1/jobs",
        summary="This tenant's queued and dead-lettered background jobs (extraction, consolidation)",
        tags=["jobs"],
        responses={
            200: {"description": "the jobs", "content": {"application/json": {"model": JobList}}},
            **error_responses(401, 422),
        },
    )
    def list_jobs():
        reject_unknown_query(app, frozenset())
        waiting, dead = service.jobs(app.tenant())
        return json_response(
            200,
            {
                "waiting": None if waiting is None else [job_out(j) for j in waiting],
                "dead_lettered": [job_out(j, "dead") for j in dead],
            },
        )

    @app.post(
        "/v1/jobs/redrive",
        summary="Put this tenant's dead-lettered jobs (or the listed ones) back on their queue",
        tags=["jobs"],
        responses={
            200: {"description": "how many", "content": {"application/json": {"model": RedriveResponse}}},
            **error_responses(400, 401, 422),
        },
    )
    def redrive(body: Annotated[RedriveRequest, Body()]):
        return json_response(200, {"redriven": service.redrive(app.tenant(), body.job_ids)})

    @app.get(
        "/v1/jobs/<job_id>",
        summary="One job's state: queued, running, done or failed (with the error), a while after it ends",
        tags=["jobs"],
        responses={
            200: {"description": "the job", "content": {"application/json": {"model": JobStatusResponse}}},
            **error_responses(401, 404, 422),
        },
    )
    def get_job(job_id: Annotated[str, Path(min_length=1, max_length=200)]):
        reject_unknown_query(app, frozenset())
        return json_response(200, status_out(service.job(app.tenant(), job_id)))
