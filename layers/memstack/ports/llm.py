"""The LLM port: extraction decisions and summaries, as structured data, never free text to parse."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from memstack.models import Category, Kind, MemoryRecord, Message

OpName = Literal["ADD", "UPDATE", "DELETE", "NONE", "CONFLICT"]


class ExtractionOp(BaseModel):
    """One decision of context-aware extraction.

    ``CONFLICT``: ``content`` contradicts the current memory ``target_id`` and nothing says which
    is right; both are kept and linked (``MemoryRecord.conflicts_with``) so the agent can ask.
    """

    op: OpName
    target_id: str | None = None
    content: str | None = None
    kind: Kind = Kind.FACT
    category: Category | None = None
    event_time: datetime | None = None
    source_ids: list[str] = Field(default_factory=list)


class Extractor(Protocol):
    name: str

    def extract(
        self, message: Message, context: list[Message], neighbours: list[MemoryRecord]
    ) -> list[ExtractionOp]:
        """Decide ADD / UPDATE / DELETE / NONE for ``message`` given the most similar memories."""
        ...


class Summariser(Protocol):
    name: str

    def summarise(self, texts: list[str], max_tokens: int) -> str: ...

    def synthesise(
        self, summaries: list[str], existing: list[MemoryRecord], max_tokens: int
    ) -> list[str]: ...
