"""The LLM port: extraction decisions and summaries, as structured data, never free text to parse."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from memstack.models import BUILT_IN_CATEGORIES, Kind, MemoryRecord, Message

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
    category: str | None = None
    event_time: datetime | None = None
    source_ids: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class CategoryChoice:
    """A category an extracted memory may be filed under: its name, what it is for, its keywords."""

    name: str
    description: str
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class Guidance:
    """What a tenant asks of extraction (``domain.tenant``): its own categories and instructions.

    ``built_in``: the 15 built-in categories are among the choices (before ``custom``);
    ``instructions`` is free text for a model to follow (the offline rules cannot read it).
    """

    custom: tuple[CategoryChoice, ...] = ()
    built_in: bool = True
    instructions: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        own = tuple(c.name for c in self.custom)
        return (*BUILT_IN_CATEGORIES, *own) if self.built_in else own


#: no tenant configuration: the built-in categories, no instructions
DEFAULT_GUIDANCE = Guidance()


class Extractor(Protocol):
    name: str

    def extract(
        self,
        message: Message,
        context: list[Message],
        neighbours: list[MemoryRecord],
        guidance: Guidance = DEFAULT_GUIDANCE,
    ) -> list[ExtractionOp]:
        """Decide ADD / UPDATE / DELETE / NONE for ``message`` given the most similar memories,
        filing memories under ``guidance``'s categories and following its instructions."""
        ...


class Summariser(Protocol):
    name: str

    def summarise(self, texts: list[str], max_tokens: int) -> str: ...

    def synthesise(
        self, summaries: list[str], existing: list[MemoryRecord], max_tokens: int
    ) -> list[str]: ...
