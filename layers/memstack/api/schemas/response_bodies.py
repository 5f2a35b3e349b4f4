"""Response bodies of the REST API (v1): what a call answers (``memstack.api.schemas``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from memstack.api.schemas.fields import Schema
from memstack.domain.tenant.config import READ_BACK, TenantConfig
from memstack.models import Kind, Scope, Tier


class AddMemoriesResponse(Schema):
    accepted: list[str] = Field(description="ids of every message in the request, all durably stored")
    stored: list[str] = Field(description="ids stored by this request (a retried id is not stored twice)")
    queued: int = Field(description="extraction jobs queued")
    status: Literal["stored", "queued", "processed"]
    job_ids: list[str] = Field(
        default_factory=list, description="the queued jobs: follow each with GET /v1/jobs/{id}"
    )


class Memory(Schema):
    id: str
    user_id: str
    session_id: str | None = None
    scope: Scope
    tier: Tier
    kind: Kind
    category: str | None = None
    content: str
    speaker: str | None = None
    event_time: datetime | None = None
    created_at: datetime
    is_current: bool
    superseded_at: datetime | None = None
    deleted: bool = False
    replaces_id: str | None = None
    version: int
    source_ids: list[str] = Field(default_factory=list)
    conflicts_with: list[str] = Field(
        default_factory=list,
        description=(
            "ids of current memories this one contradicts, nothing saying which is right: ask the user."
            " In search results the counterpart follows the hit that brought it, at the same score"
        ),
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent_id: str | None = Field(None, description="the agent of the conversation it came from")
    expires_at: datetime | None = Field(None, description="when it expires (null: never)")


class SearchResultItem(Memory):
    score: float = Field(description="calibrated probability that the result is relevant (0-1)")
    superseded: bool = Field(
        False,
        description="an older version (history queries), or a raw turn whose memories were all replaced",
    )
    stages: dict[str, float] | None = Field(
        None, description="each stage's score and the result's rank after each stage (explain=true)"
    )


class SearchExplain(Schema):
    analysis: dict[str, Any] = Field(
        description="stage 1's reading of the query: reference time, temporal window, history intent, cues"
    )
    stage_durations: dict[str, float] = Field(description="milliseconds per stage, plus total")
    stage_status: dict[str, str] = Field(
        description='what each stage did: "ok", "skipped: ..." or "failed: ..."'
    )


class SearchMemoriesResponse(Schema):
    results: list[SearchResultItem]
    evidence: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description=(
            "probability (0-1) that the user's memories hold evidence for this query at all, beside the"
            " per-result scores: a low value says the store likely cannot answer (abstain or ask), which"
            " a result's score cannot say (docs/retrieval.md, Abstention). Always sent; null only from"
            " a server older than the field"
        ),
    )
    degraded: list[str] = Field(default_factory=list, description="stages skipped because a part failed")
    explain: SearchExplain | None = Field(None, description="how the search ran (explain=true)")


class MemoryList(Schema):
    memories: list[Memory]
    next_cursor: str | None = None


class MemoryHistory(Schema):
    memories: list[Memory] = Field(description="the version chain, oldest first")


class DeleteMemoryResponse(Schema):
    id: str
    deleted: bool
    tombstone_id: str
    version: int


class DeleteMemoriesResponse(Schema):
    deleted: int = Field(description="how many memories were deleted (each now ends in a tombstone version)")
    ids: list[str] = Field(description="the ids of the versions that were current and are now deleted")


class SourceTurn(Schema):
    message_id: str
    turn: Memory | None = Field(
        None, description="the raw turn (tier stm) stored for that message; null once it is gone"
    )


class MemorySources(Schema):
    sources: list[SourceTurn] = Field(description="the messages the memory was made from, in its order")


class JobEntry(Schema):
    id: str
    type: str
    user_id: str | None = None
    status: Literal["pending", "running", "dead"]
    attempts: int = 0
    error: str | None = Field(None, description="the last failure, as the worker reported it")


class JobList(Schema):
    waiting: list[JobEntry] | None = Field(
        description="jobs not done yet, oldest first; null where the queue cannot list them (SQS)"
    )
    dead_lettered: list[JobEntry]


class JobFailure(Schema):
    code: str = Field(
        description="throttled, dependency_failed, storage_full, invalid_input, not_found, conflict, "
        "worker_lost or internal_error"
    )
    message: str = Field(description="what failed and what happens next, for a person to read")


class JobStatusResponse(Schema):
    id: str
    type: str = Field(description="extract or consolidate")
    user_id: str
    status: Literal["queued", "running", "done", "failed"] = Field(
        description="failed: dead-lettered (POST /v1/jobs/redrive queues it again)"
    )
    attempts: int = Field(description="attempts so far")
    error: JobFailure | None = Field(
        None, description="the last failed attempt's (a queued job with an error is being retried)"
    )
    queued_at: datetime
    updated_at: datetime
    expires_at: datetime = Field(description="after this the job is no longer shown (404)")


class RedriveResponse(Schema):
    redriven: int


class TierCounts(Schema):
    stm: int = Field(description="current raw turns (short-term memory)")
    ltm: int = Field(description="current memories (long-term memory), deleted ones left out")


class UserSummary(Schema):
    user_id: str
    counts: TierCounts
    last_write: datetime | None = Field(
        None, description="when the newest record of the user (a version or a tombstone) was written"
    )


class UserList(Schema):
    users: list[UserSummary] = Field(description="this tenant's users with records, by user id")
    next_cursor: str | None = None


class ImportUserResponse(Schema):
    user_id: str
    imported: int = Field(description="records written")
    skipped_existing: int = Field(description="records already there (an import sent again skips them)")
    reembedded: int = Field(
        description="records embedded again (another embedder, or exported without vectors)"
    )


class EraseUserResponse(Schema):
    user_id: str
    erased: dict[str, int]


class ConsolidationResponse(Schema):
    model_config = ConfigDict(extra="allow")

    user_id: str
    status: str
    read: int = 0
    written: int = 0
    updated: int = 0
    unchanged: int = 0
    marked: int = 0


class HealthResponse(Schema):
    status: Literal["ok"]
    version: str
    backends: dict[str, str]


class ErrorBody(Schema):
    code: str
    message: str
    details: list[dict[str, Any]] = Field(default_factory=list)


class ErrorResponse(Schema):
    error: ErrorBody


class TenantConfigResponse(Schema):
    """``GET/PUT/PATCH /v1/config``: the tenant's configuration (every section, defaults filled in)."""

    config: TenantConfig
    version: int = Field(description="0 until the first write; each write adds one (send it as If-Match)")
    updated_at: datetime | None = None

    @classmethod
    def read_back(cls, answer: Any) -> TenantConfigResponse:
        """An answer as a client reads it: the webhook secret in it is the mask, not a secret."""
        return cls.model_validate(answer, context=READ_BACK)
