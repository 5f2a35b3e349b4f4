"""The data model of docs/architecture.md: messages in, memory records stored.

Embeddings travel beside records (``MemoryRecord.embedding_full`` and
``embedding_coarse``) but are never part of an API answer: ``public_dict``
leaves them out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from memstack.domain.filter_expr import Node

if TYPE_CHECKING:
    import numpy as np


def utcnow() -> datetime:
    return datetime.now(UTC)


#: ``metadata["consolidation"]`` of what consolidation writes: a summary of a group of turns, a
#: synthesis of several summaries and memories. Both restate their sources in general terms
#: ("rollups"): retrieval keeps them from taking the places of the evidence they were built from.
SUMMARY = "summary"
SYNTHESIS = "synthesis"
ROLLUPS: tuple[str, ...] = (SUMMARY, SYNTHESIS)
#: ... and of a profile: one memory per person and category, meant to answer "what are Mel's hobbies"
PROFILE = "profile"


def new_id() -> str:
    return uuid.uuid4().hex


class Scope(StrEnum):
    USER = "USER"
    CONTEXT = "CONTEXT"


class Tier(StrEnum):
    STM = "stm"
    LTM = "ltm"


class Kind(StrEnum):
    FACT = "fact"
    EVENT = "event"
    PREFERENCE = "preference"


class Category(StrEnum):
    """The 15 semantic categories of the Cognis design."""

    PERSONAL_DETAILS = "personal_details"
    PROFESSIONAL = "professional"
    HEALTH = "health"
    RELATIONSHIPS = "relationships"
    PREFERENCES = "preferences"
    HOBBIES = "hobbies"
    GOALS = "goals"
    FINANCIAL = "financial"
    EDUCATIONAL = "educational"
    TRAVEL = "travel"
    EMOTIONAL = "emotional"
    TECHNICAL_SKILLS = "technical_skills"
    DIETARY = "dietary"
    BEHAVIORAL_PATTERNS = "behavioral_patterns"
    COMMUNICATION_STYLE = "communication_style"


#: the 15 built-in categories' names; a tenant may add its own or replace them (domain.tenant.config)
BUILT_IN_CATEGORIES: tuple[str, ...] = tuple(str(c) for c in Category)
#: a category's name: lower-case words joined by "_" (the built-in names have this form)
CATEGORY_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class Message(BaseModel):
    """One conversation turn as an agent sends it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id, min_length=1, max_length=128)
    role: Role = Role.USER
    speaker: str | None = Field(default=None, max_length=200)
    content: str = Field(min_length=1)
    timestamp: datetime | None = None

    @field_validator("timestamp", mode="before")
    @classmethod
    def _parse_timestamp(cls, value: Any, info: ValidationInfo) -> datetime | None:
        """ISO 8601, epoch seconds/ms, or human forms ("1:56 pm on 8 May, 2023"); always aware.

        A naive time is read in ``context["timezone"]`` when the caller passes
        one (``Message.model_validate(data, context={"timezone": ...})``), else
        in UTC. The edges pass ``Settings.timezone`` (the API localises first).
        """
        if value is None:
            return None
        from memstack.domain.time.parse import parse_timestamp

        zone = (info.context or {}).get("timezone") if isinstance(info.context, dict) else None
        return parse_timestamp(value, zone)


class MemoryRecord(BaseModel):
    """One memory: a raw turn (tier stm) or a distilled fact/event/preference (tier ltm)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id)
    tenant: str
    user_id: str
    session_id: str | None = None
    scope: Scope = Scope.USER
    tier: Tier = Tier.LTM
    kind: Kind = Kind.FACT
    # A built-in ``Category`` or one of the tenant's own (domain.tenant.config): a plain name.
    category: str | None = None
    content: str
    speaker: str | None = None
    event_time: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    is_current: bool = True
    superseded_at: datetime | None = None
    deleted: bool = False
    replaces_id: str | None = None
    version: int = 1
    source_ids: list[str] = Field(default_factory=list)
    #: current memories this one contradicts when nothing said which is right (both kept, each naming
    #: the other): search shows such a pair together so the agent can ask instead of guessing
    conflicts_with: list[str] = Field(default_factory=list)
    # Text indexed for BM25 when it should differ from ``content`` (for example
    # a turn indexed with the turn it answers); ``None`` means ``content``.
    search_text: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding_full: list[float] | None = Field(default=None, repr=False)
    embedding_coarse: list[float] | None = Field(default=None, repr=False)

    def public_dict(self) -> dict[str, Any]:
        return self.model_dump(
            mode="json", exclude={"embedding_full", "embedding_coarse", "search_text", "tenant"}
        )

    @property
    def indexed_text(self) -> str:
        # An empty search text is deliberate (an assistant's reply kept out of BM25), not a missing one.
        return self.content if self.search_text is None else self.search_text


#: Metadata keys the system writes itself: a caller may not set them, and an edit of a
#: memory's metadata keeps them (the agent it came from, its key, extraction bookkeeping).
SYSTEM_METADATA_KEYS = frozenset(
    {
        "role",
        "consolidated",
        "edited",
        "key",
        "agent_id",
        "op_key",
        "expires_at",
        "chunk",
        "chunks",
        "passage",
        "passages",
        "adjacent",
        "adjacent_at",
    }
)


class MemoryFilters(BaseModel):
    """Filters every listing and search accepts; tenant and user are never optional."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    kind: Kind | None = None
    category: str | None = None
    scope: Scope | None = None
    tier: Tier | None = None
    after: datetime | None = None
    before: datetime | None = None
    # Session of the caller: CONTEXT memories are visible only inside it.
    session_id: str | None = None
    # True: only memories of ``session_id`` itself (Mem0's run_id, AgentCore's ListEvents(sessionId));
    # False: every USER memory plus that session's CONTEXT ones (the caller's view from inside it).
    session_only: bool = False
    include_superseded: bool = False
    # key -> the values its metadata may hold there (one: equality, several: any of them);
    # every key must match. The meaning is ``domain.metadata_filter``'s, on every backend.
    metadata: dict[str, tuple[str | int | float | bool, ...]] | None = None
    # AND / OR / NOT over comparisons on metadata and record fields (``domain.filter_expr``),
    # ANDed with everything above; each backend translates it.
    where: Node | None = None


#: how ``list`` orders a user's memories, newest first either way: by when each record was
#: written (``created_at``), or by when what it says happened (``event_time``, or ``created_at``
#: when it has none: the time the after/before filters compare). Ties go to the store's own key.
ListOrder = Literal["created_at", "event_time"]
LIST_ORDERS: tuple[ListOrder, ...] = ("created_at", "event_time")


@dataclass(frozen=True, slots=True)
class UserSummary:
    """One user of a tenant as ``GET /v1/users`` lists it.

    ``stm`` and ``ltm`` count the user's current, live (not deleted) records of
    each tier; ``last_write`` is the ``created_at`` of the newest record written
    for the user (a new version or a tombstone counts), ``None`` if unknown.
    """

    user_id: str
    stm: int
    ltm: int
    last_write: datetime | None


@dataclass(slots=True)
class ScoredId:
    """A search hit from one retrieval stage (a plain slotted class: a search makes ~600 of them)."""

    id: str
    score: float


class Ranked(Sequence[ScoredId]):
    """A ranking as columns: ``ids[i]`` scored ``scores[i]``, best first.

    A store that ranks in numpy (the embedded one) returns this instead of one
    ``ScoredId`` per hit: the fusion reads the columns (``units.field_ranks``),
    and an object is made only for an entry someone indexes. ``turn`` (bool per
    entry, optional): whether each id is a raw turn's (``ingest.is_turn_id``), when
    the store already knows it. ``rows`` (int64 per entry, optional): the store's own
    row of each id in what it ranked (the embedded store's index of the user): the
    fusion tells candidates apart by them instead of by id, and gives them back with
    the ids when it reads the pool (``CandidateReader.candidates``), a hint the store
    checks; they mean nothing to anyone else.
    """

    __slots__ = ("ids", "rows", "scores", "turn")

    def __init__(
        self,
        ids: list[str],
        scores: np.ndarray,
        turn: np.ndarray | None = None,
        rows: np.ndarray | None = None,
    ) -> None:
        self.ids = ids
        self.scores = scores
        self.turn = turn
        self.rows = rows

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> ScoredId: ...
    @overload
    def __getitem__(self, index: slice) -> Ranked: ...
    def __getitem__(self, index: int | slice) -> ScoredId | Ranked:
        if isinstance(index, slice):
            turn = self.turn[index] if self.turn is not None else None
            rows = self.rows[index] if self.rows is not None else None
            return Ranked(self.ids[index], self.scores[index], turn, rows)
        return ScoredId(id=self.ids[index], score=float(self.scores[index]))

    def __iter__(self) -> Iterator[ScoredId]:
        return (ScoredId(id=i, score=s) for i, s in zip(self.ids, self.scores.tolist(), strict=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable columns, like a list

    def __repr__(self) -> str:
        return f"Ranked({list(self)!r})"
