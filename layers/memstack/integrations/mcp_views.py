"""What the MCP tools answer: memories in the form a model reads, compact and without internals.

A tool result is read by a model, token by token: the REST shapes (every field,
nulls, ``stages: null``, the owner's user id, source message ids, scope, times
to the microsecond) made ten search hits about 8 KB of pretty-printed JSON.
Here a memory keeps what a model acts on (its id, text, score, kind, category,
times, session, agent, the caller's labels, its version), a field that says
nothing (null, empty, the usual value) is left out, times are to the second,
and the text block is compact JSON equal to the structured content.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from memstack.api.schemas import Memory, SearchMemoriesResponse, SearchResultItem
from memstack.domain.categories import CATEGORY_LABELS
from memstack.domain.tenant.config import TenantConfig
from memstack.models import BUILT_IN_CATEGORIES, SYSTEM_METADATA_KEYS, Tier


class MemoryView(BaseModel):
    id: str = Field(description="the memory's id (for get_memory, update_memory, delete_memory)")
    content: str
    kind: str = Field(description="fact, event or preference")
    category: str | None = None
    speaker: str | None = Field(None, description="who said it, when it is a conversation turn as said")
    event_time: datetime | None = Field(None, description="when what it tells happened (or was said)")
    created_at: datetime = Field(description="when memstack stored this version")
    session_id: str | None = None
    agent_id: str | None = Field(None, description="the agent of the conversation it came from")
    metadata: dict[str, Any] | None = Field(None, description="the labels it was stored with")
    expires_at: datetime | None = Field(None, description="when it will be forgotten")
    version: int | None = None
    replaces_id: str | None = Field(None, description="the version this one replaced")
    is_current: bool | None = Field(None, description="false: an older version, kept in the history")
    deleted: bool | None = Field(None, description="true: this version records that the memory was deleted")
    conflicts_with: list[str] | None = Field(
        None, description="ids of current memories this one contradicts: ask the user which is right"
    )


class HitView(MemoryView):
    score: float = Field(description="how likely it is relevant to the query (0-1)")
    superseded: bool | None = Field(None, description="true: no longer current (asked for history)")


class SearchView(BaseModel):
    results: list[HitView] = Field(description="best first")
    evidence: float | None = Field(
        None,
        description="how likely the memories hold evidence for the query at all (0-1): low means "
        "memstack probably does not know, whatever the results' scores",
    )
    degraded: list[str] | None = Field(None, description="search stages skipped because a part failed")


class MemoryPage(BaseModel):
    memories: list[MemoryView]
    next_cursor: str | None = Field(None, description="pass it as cursor for the next page")


class HistoryView(BaseModel):
    memories: list[MemoryView] = Field(description="the versions, oldest first")


class CategoryView(BaseModel):
    name: str = Field(description="what search_memories and list_memories take as category")
    description: str = Field(description="what is filed under it")


class CategoriesView(BaseModel):
    categories: list[CategoryView] = Field(description="every category a memory of this deployment can have")


def categories_view(config: TenantConfig) -> CategoriesView:
    """The tenant's categories: the built-in ones (unless it replaced them), then its own."""
    section = config.categories
    built_in = [] if section.mode == "replace" else [(c, CATEGORY_LABELS[c]) for c in BUILT_IN_CATEGORIES]
    own = [(c.name, c.description) for c in section.custom]
    return CategoriesView(categories=[CategoryView(name=n, description=d) for n, d in (*built_in, *own)])


def _second(when: datetime | None) -> datetime | None:
    return when.replace(microsecond=0) if when is not None else None


def _view_fields(memory: Memory) -> dict[str, Any]:
    labels = {k: v for k, v in memory.metadata.items() if k not in SYSTEM_METADATA_KEYS}
    return {
        "id": memory.id,
        "content": memory.content,
        "kind": str(memory.kind),
        "category": str(memory.category) if memory.category else None,
        # A raw turn said by "the user" or "the assistant" names no speaker but keeps its role.
        "speaker": memory.speaker or (memory.metadata.get("role") if memory.tier == Tier.STM else None),
        "event_time": _second(memory.event_time),
        "created_at": _second(memory.created_at),
        "session_id": memory.session_id,
        "agent_id": memory.agent_id,
        "metadata": labels or None,
        "expires_at": _second(memory.expires_at),
        "version": memory.version,
        "replaces_id": memory.replaces_id,
        "is_current": None if memory.is_current else False,
        "deleted": True if memory.deleted else None,
        "conflicts_with": memory.conflicts_with or None,
    }


def memory_view(memory: Memory) -> MemoryView:
    return MemoryView(**_view_fields(memory))


def hit_view(hit: SearchResultItem) -> HitView:
    """A search hit: a memory without its version bookkeeping, with its score."""
    fields = {**_view_fields(hit), "version": None, "replaces_id": None}
    return HitView(**fields, score=round(hit.score, 4), superseded=True if hit.superseded else None)


def search_view(answer: SearchMemoriesResponse) -> SearchView:
    return SearchView(
        results=[hit_view(h) for h in answer.results],
        evidence=None if answer.evidence is None else round(answer.evidence, 4),
        degraded=answer.degraded or None,
    )


def tool_result(view: BaseModel) -> CallToolResult:
    """``view`` as a tool result: structured content, and the same as compact JSON text."""
    structured = view.model_dump(mode="json", exclude_none=True)
    text = view.model_dump_json(exclude_none=True)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)
