"""Request and response bodies of the REST API (v1).

These models are the contract: Powertools validates every request against
them and generates the OpenAPI document from them, and the Python client
parses answers with the same classes. They import nothing from Powertools,
so the client can use them without the server's dependencies.

Static rules (types, required fields, unknown fields, empty strings, control
characters) live here; limits that come from ``Settings`` (message length,
messages per request, query length, ``top_k``) are checked by
``memstack.api.limits`` because a class cannot read configuration.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StringConstraints,
    model_validator,
)

from memstack.api.json_body import OversizedInteger
from memstack.domain import filter_expr
from memstack.domain.tenant.config import READ_BACK, TenantConfig
from memstack.models import CATEGORY_PATTERN, SYSTEM_METADATA_KEYS, Kind, Role, Scope, Tier

# Any C0 control character or DEL. Free text may keep tab, newline and carriage return.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _no_control(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


def _clean_text(value: str) -> str:
    if _CONTROL_IN_TEXT.search(value):
        raise ValueError("must not contain control characters (tab and newline are allowed)")
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


# Every store can hold a 64-bit integer (SQLite INTEGER, OpenSearch long); a larger one failed
# in the store after the request was accepted.
_INT_RANGE = (-(2**63), 2**63 - 1)


def _metadata_value(value: Any) -> str | int | float | bool | None:
    """A JSON scalar; strings short and printable, integers 64-bit, numbers finite (NaN is not JSON)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | OversizedInteger):
        if isinstance(value, OversizedInteger) or not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise ValueError("integers must fit in 64 bits (-2**63 .. 2**63-1)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("numbers must be finite")
        return value
    if isinstance(value, str):
        if len(value) > 1000:
            raise ValueError("strings may have at most 1000 characters")
        return _no_control(value)
    raise ValueError("must be a string, number, boolean or null")


# User, session and message ids: they appear in URLs and in DynamoDB keys
# ("<tenant>#<user_id>"), so they are restricted to characters that need no
# escaping anywhere and cannot forge a key separator.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@:+=\-]*$"
IdStr = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=128, pattern=ID_PATTERN)]
#: a built-in category or one of the tenant's own (``GET /v1/config``); the service checks which
CategoryStr = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=40, pattern=CATEGORY_PATTERN),
    Field(description="one of the tenant's categories: the 15 built-in ones and/or its own (GET /v1/config)"),
]
Text = Annotated[str, StringConstraints(strict=True, min_length=1), AfterValidator(_clean_text)]
ShortText = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=200), AfterValidator(_no_control)
]
MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
MetadataValue = Annotated[
    str | int | float | bool | None,
    PlainValidator(_metadata_value, json_schema_input_type=str | int | float | bool | None),
]

#: how many keys one metadata filter may test, and how many values one ``in`` may list
MAX_FILTER_KEYS = 20
MAX_IN_VALUES = 100
_CONDITION_SHAPE = "a condition is a value (equality) or {operator: value} with operator one of " + ", ".join(
    filter_expr.OPERATORS
)


def _filter_value(value: Any) -> str | int | float | bool:
    if value is None:
        raise ValueError("null matches nothing: filter on a string, number or boolean")
    out = _metadata_value(value)
    assert out is not None
    return out


@dataclass(frozen=True)
class MetadataOps:
    """A key's condition written with operators other than ``in`` (``{"gt": 3}``), already checked.

    It joins the filter expression (``domain.filter_expr``); plain values and ``in``
    keep the metadata term index's fast path.
    """

    condition: dict[str, Any]


def _metadata_condition(value: Any) -> tuple[str | int | float | bool, ...] | MetadataOps:
    """One key's condition as the values it may hold: ``v`` is ``(v,)``, ``{"in": [a, b]}`` is ``(a, b)``."""
    if isinstance(value, dict):
        if not value:
            raise ValueError(_CONDITION_SHAPE)
        if set(value) != {"in"}:
            try:
                filter_expr.metadata_condition("key", value, "value")
            except filter_expr.FilterError as exc:
                raise ValueError(re.sub(r"^value[^:]*: ", "", str(exc))) from None
            return MetadataOps(dict(value))
        values = value["in"]
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_IN_VALUES:
            raise ValueError(f'"in" takes a list of 1 to {MAX_IN_VALUES} values')
        return tuple(_filter_value(v) for v in values)
    if isinstance(value, list):
        raise ValueError('a list of values is written {"in": [values]}')
    return (_filter_value(value),)


class Schema(BaseModel):
    """Every request and response model here is built on its first use, not at import: a request
    builds only its own route's models (``defer_build``; building all of them was a twentieth of the
    API function's cold import, and no call needs most of them)."""

    model_config = ConfigDict(defer_build=True)


class MetadataIn(Schema):
    """A condition met by any of these values: ``{"in": ["food", "travel"]}``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    in_: list[str | int | float | bool] = Field(
        alias="in", min_length=1, max_length=MAX_IN_VALUES, description="the key holds any of these values"
    )


#: key -> condition; every key must match. Values compare as JSON values do ("1", 1 and true differ).
MetadataFilter = Annotated[
    dict[
        MetadataKey,
        Annotated[
            # tuple[scalar, ...] (equality, in) | MetadataOps (other operators); Any keeps the
            # internal class out of the OpenAPI document (the input schema says what is sent).
            Any,
            PlainValidator(
                _metadata_condition,
                json_schema_input_type=str | int | float | bool | MetadataIn | dict[str, Any],
            ),
        ],
    ],
    Field(
        max_length=MAX_FILTER_KEYS,
        description='memories whose metadata holds these values: {"topic": "food"} (equality), '
        '{"topic": {"in": ["food", "travel"]}} (any of them), {"priority": {"gte": 2, "lt": 5}} (operators '
        + ", ".join(filter_expr.OPERATORS)
        + "); every key must match",
    ),
]


def _expression(value: Any) -> filter_expr.Node:
    try:
        return filter_expr.parse(value)
    except filter_expr.FilterError as exc:
        raise ValueError(str(exc)) from None


#: AND / OR / NOT over conditions on metadata and the record's fields (``domain.filter_expr``)
FilterExpression = Annotated[
    filter_expr.Node,
    PlainValidator(_expression, json_schema_input_type=dict[str, Any]),
    Field(
        description='{"AND": [filters]}, {"OR": [filters]}, {"NOT": filter}, or {field: condition}; fields: '
        "created_at, event_time, category, kind, agent_id, metadata.<key> "
        '(or {"metadata": {key: condition}}); a condition is a value (equality) or {operator: value}, '
        "operators eq, ne, gt, gte, lt, lte, in, nin, "
        'contains; e.g. {"AND": [{"created_at": {"gte": "2026-01-01T00:00:00Z"}}, '
        '{"metadata": {"priority": {"gt": 2}}}]}',
        examples=[{"OR": [{"category": "travel"}, {"metadata": {"priority": {"gte": 3}}}]}],
    ),
]


def merged_expression(*parts: Any) -> Any:
    """The JSON of the AND of the given expressions (``None`` ones left out)."""
    given = [p for p in parts if p is not None]
    if not given:
        return None
    return given[0] if len(given) == 1 else {"AND": given}


# Keys the system itself writes into a record's metadata; a caller may not forge them.
RESERVED_METADATA_KEYS = SYSTEM_METADATA_KEYS


def _no_reserved_keys(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value:
        reserved = sorted(RESERVED_METADATA_KEYS & value.keys())
        if reserved:
            raise ValueError(f"keys {reserved} are reserved")
    return value


class Strict(Schema):
    """Unknown fields are an error, never silently dropped."""

    model_config = ConfigDict(extra="forbid")


class RunIdAlias(Strict):
    """``run_id`` (Mem0's name for a conversation run) is ``session_id``."""

    session_id: IdStr | None = None
    run_id: IdStr | None = Field(None, description="an alias of session_id (Mem0's name)")

    @model_validator(mode="after")
    def _one_session(self) -> RunIdAlias:
        if self.run_id is not None:
            if self.session_id is not None and self.session_id != self.run_id:
                raise ValueError("run_id is an alias of session_id: send one of them (or the same value)")
            self.session_id, self.run_id = self.run_id, None
        return self


# ----------------------------------------------------------------------- requests
class MessageIn(Strict):
    id: IdStr | None = Field(
        None, description="your message id; generated when absent (retries should send it)"
    )
    role: Role = Field(description="user | assistant | system | tool")
    speaker: ShortText | None = Field(None, description="the speaker's name, when it is not just the role")
    content: Text
    timestamp: datetime | None = Field(
        None, description="when it was said (ISO 8601); naive means the server timezone"
    )


#: the longest time to live an add or an edit may ask for (ten years, in seconds)
MAX_TTL_SECONDS = 10 * 366 * 86400
EXPIRES_AT = "when the memory expires (ISO 8601; naive means the server timezone): it is never returned after"
TTL = "seconds from now until the memory expires (instead of expires_at)"


class ExpiryFields(Strict):
    """``expires_at`` or ``ttl`` (Mem0's ``expiration_date``): one of them, or neither."""

    expires_at: datetime | None = Field(None, description=EXPIRES_AT)
    ttl: StrictInt | None = Field(None, ge=1, le=MAX_TTL_SECONDS, description=TTL)

    @model_validator(mode="after")
    def _one_expiry(self) -> ExpiryFields:
        if self.expires_at is not None and self.ttl is not None:
            raise ValueError("give expires_at or ttl, not both")
        return self


class AddMemoriesRequest(RunIdAlias, ExpiryFields):
    user_id: IdStr
    agent_id: IdStr | None = Field(
        None, description="the agent that took part; kept on the messages and the memories made from them"
    )
    scope: Scope = Scope.USER
    messages: list[MessageIn] = Field(min_length=1)
    infer: StrictBool = Field(True, description="false stores the raw messages without extraction")
    sync: StrictBool = Field(False, description="true waits until extraction has run")
    metadata: Annotated[dict[MetadataKey, MetadataValue] | None, AfterValidator(_no_reserved_keys)] = Field(
        None, max_length=50
    )


class SearchFilters(Strict):
    """Every given filter must hold; ``AND`` / ``OR`` / ``NOT`` and record-field conditions at this
    level (``{"category": {"in": [...]}}``, ``{"created_at": {"gte": ...}}``) are ``where`` (Mem0's shape)."""

    kind: Kind | None = None
    category: CategoryStr | None = None
    scope: Scope | None = None
    tier: Tier | None = None
    after: datetime | None = None
    before: datetime | None = None
    metadata: MetadataFilter | None = None
    where: FilterExpression | None = None
    # Mem0's shape: read as ``where`` (by the validator below), never kept here.
    AND: list[dict[str, Any]] | None = Field(None, description="read as where: all of these hold")
    OR: list[dict[str, Any]] | None = Field(None, description="read as where: any of these holds")
    NOT: dict[str, Any] | list[dict[str, Any]] | None = Field(
        None, description="read as where: this does not hold"
    )

    @model_validator(mode="before")
    @classmethod
    def _logic_and_operators(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        # Mem0 writes a record field's condition at the top ({"category": {"in": [...]}},
        # {"created_at": {"gte": ...}}): a condition on a record field that is not one of this
        # model's plain filters is read as a where condition too.
        as_where = {
            k: v
            for k, v in value.items()
            if k in filter_expr.RECORD_FIELDS and (isinstance(v, dict) or k not in cls.model_fields)
        }
        out = {k: v for k, v in value.items() if k not in filter_expr.LOGIC and k not in as_where}
        logic = {k: value[k] for k in filter_expr.LOGIC if k in value}
        where = merged_expression(out.get("where"), logic or None, as_where or None)
        if where is not None:
            out["where"] = where
        return out


AGENT_FILTER = "only memories of this agent (from messages added with this agent_id)"


SESSION_MODE = (
    "with session_id: only (the default) keeps that session's memories alone (Mem0's run_id, AgentCore's "
    "ListEvents(sessionId)); visible keeps every USER memory plus that session's CONTEXT memories "
    "(what an agent sees from inside the session)"
)
SessionMode = Literal["only", "visible"]


class SearchMemoriesRequest(RunIdAlias):
    user_id: IdStr
    session_mode: SessionMode = Field("only", description=SESSION_MODE)
    agent_id: IdStr | None = Field(None, description=AGENT_FILTER)
    query: Text
    top_k: StrictInt = Field(10, ge=1)
    filters: SearchFilters | None = None
    reference_time: datetime | None = Field(None, description="'now' for relative dates in the query")
    explain: StrictBool = False
    include_history: StrictBool = False
    min_score: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="only results scoring at least this: the score is a calibrated probability of relevance "
        "(the reranker's relevance when one is configured), comparable across queries",
    )


# A memory's key (``PUT /v1/memories/keys/{key}``): printable, no slash (it is one path segment).
KEY_PATTERN = r"^[^\x00-\x1f\x7f/]+$"


class PutKeyedMemoryRequest(Strict):
    user_id: IdStr
    content: Text
    session_id: IdStr | None = Field(None, description="with scope CONTEXT: seen only in this session")
    scope: Scope | None = None
    kind: Kind | None = Field(None, description="fact (default) | event | preference")
    category: CategoryStr | None = None
    event_time: datetime | None = Field(None, description="when it happened (ISO 8601)")
    metadata: Annotated[dict[MetadataKey, MetadataValue] | None, AfterValidator(_no_reserved_keys)] = Field(
        None, max_length=50, description="replaces the previous version's metadata"
    )


class UpdateMemoryRequest(ExpiryFields):
    """At least one of ``content``, ``metadata``, ``expires_at`` / ``ttl``; what is not given stays.

    ``expires_at: null`` removes the memory's expiry.
    """

    user_id: IdStr
    content: Text | None = Field(None, description="the new text (embedded again)")
    metadata: Annotated[dict[MetadataKey, MetadataValue] | None, AfterValidator(_no_reserved_keys)] = Field(
        None,
        max_length=50,
        description="replaces the memory's metadata (keys the system keeps, such as agent_id, stay)",
    )

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateMemoryRequest:
        if not {"content", "metadata", "expires_at", "ttl"} & self.model_fields_set:
            raise ValueError("nothing to change: give content or metadata (or both), or expires_at / ttl")
        return self


class RestoreMemoryRequest(Strict):
    user_id: IdStr


class RedriveRequest(Strict):
    job_ids: list[IdStr] | None = Field(
        None, max_length=100, description="only these dead-lettered jobs (default: every one of this tenant)"
    )


class ConsolidationRequest(Strict):
    user_id: IdStr
    sync: StrictBool = False


# ---------------------------------------------------------------------- responses
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
