"""Request bodies of the REST API (v1): what a call may send (``memstack.api.schemas``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, StrictInt, model_validator

from memstack.api.schemas.fields import (
    CategoryStr,
    FilterExpression,
    IdStr,
    MetadataFilter,
    MetadataKey,
    MetadataValue,
    Schema,
    ShortText,
    Text,
    merged_expression,
    no_reserved_keys,
)
from memstack.domain import filter_expr
from memstack.models import Kind, Role, Scope, Tier


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
    metadata: Annotated[dict[MetadataKey, MetadataValue] | None, AfterValidator(no_reserved_keys)] = Field(
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
    metadata: Annotated[dict[MetadataKey, MetadataValue] | None, AfterValidator(no_reserved_keys)] = Field(
        None, max_length=50, description="replaces the previous version's metadata"
    )


class UpdateMemoryRequest(ExpiryFields):
    """At least one of ``content``, ``metadata``, ``expires_at`` / ``ttl``; what is not given stays.

    ``expires_at: null`` removes the memory's expiry.
    """

    user_id: IdStr
    content: Text | None = Field(None, description="the new text (embedded again)")
    metadata: Annotated[dict[MetadataKey, MetadataValue] | None, AfterValidator(no_reserved_keys)] = Field(
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
