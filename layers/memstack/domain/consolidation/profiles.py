"""Cross-session profile memories: per person and category, one memory that lists what is known.

A question like "What activities does Melanie partake in?" has its answer in
several sessions (swimming in one, pottery in another, camping in a third),
and none of those turns says "activity". After each consolidation run, every
(person, category) with at least ``min_items`` current extracted memories gets
one LTM memory that states them together:

    Melanie — hobbies and activities: signed up for a pottery class on 7 May
    2023; went camping with the kids; ...

It cites every source turn of every item (``source_ids``), is searched like
any memory, and is kept current: a later run that finds new, changed or
retracted items writes a new version of it (citing exactly what it lists
then), and writes nothing when nothing changed. The person is the speaker of the turn a memory
came from; the category is the one extraction gave it. Items are newest
first and capped at ``max_items``, so one memory never cites without bound.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstack.domain import versions
from memstack.domain.categories import CATEGORY_LABELS
from memstack.domain.ingest import stm_memory_id
from memstack.domain.sections import ProfileConfig
from memstack.errors import Conflict
from memstack.models import PROFILE, Kind, MemoryFilters, MemoryRecord, Scope, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.llm import ExtractionOp
from memstack.ports.store import Fence, MemoryStore

ApplyOperations = Callable[..., list[MemoryRecord]]


@dataclass
class ProfileReport:
    written: int = 0
    updated: int = 0
    unchanged: int = 0
    memory_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"written": self.written, "updated": self.updated, "unchanged": self.unchanged}


def category_label(category: str) -> str:
    """How a category is named in a profile: its plain words (a tenant's own: its name's words)."""
    return CATEGORY_LABELS.get(category, category.replace("_", " "))


def profile_text(person: str, category: str, items: list[MemoryRecord]) -> str:
    """``Person — label: item; item; ...`` with the person's name taken off the front of each item."""
    lead = re.compile(rf"^{re.escape(person)}(?:'s)?\s+", re.IGNORECASE)
    parts = []
    for item in items:
        text = lead.sub("", item.content.strip()).rstrip(".!")
        if text and text not in parts:
            parts.append(text)
    return f"{person} — {category_label(category)}: " + "; ".join(parts) + "."


class ProfileBuilder:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        config: ProfileConfig,
        apply: ApplyOperations | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self._apply = apply
        #: who hears of the profiles a refresh wrote (tenant, the versions): webhook events
        self.on_written: Callable[[str, list[MemoryRecord]], None] | None = None

    @property
    def apply(self) -> ApplyOperations:
        if self._apply is None:
            from memstack.domain.extraction.apply import apply_operations

            self._apply = apply_operations
        return self._apply

    def refresh(
        self, tenant: str, user_id: str, now: datetime, *, fence: Fence | None = None
    ) -> ProfileReport:
        """Rebuild the user's profile memories; ``fence``: when the run began (erase refuses its writes)."""
        report = ProfileReport()
        if not self.config.enabled:
            return report
        memories, profiles = self._current(tenant, user_id)
        groups = self._groups(tenant, user_id, memories)
        for (person, category), items in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            if len(items) < self.config.min_items:
                continue
            items = sorted(items, key=lambda r: (r.event_time or r.created_at, r.id), reverse=True)
            items = items[: self.config.max_items]
            key = f"{person.casefold()}|{category}"
            self._write(tenant, user_id, key, person, category, items, profiles.get(key), now, report, fence)
        return report

    def _current(self, tenant: str, user_id: str) -> tuple[list[MemoryRecord], dict[str, MemoryRecord]]:
        """The user's current extracted memories (USER scope), and current profiles by key."""
        memories: list[MemoryRecord] = []
        profiles: dict[str, MemoryRecord] = {}
        cursor: str | None = None
        while True:
            page, cursor = self.store.list(
                tenant, user_id, MemoryFilters(tier=Tier.LTM, scope=Scope.USER), 500, cursor
            )
            for r in page:
                if r.deleted or not r.is_current:
                    continue
                origin = r.metadata.get("consolidation")
                if origin == PROFILE:
                    profiles[str(r.metadata.get("profile_key"))] = r
                elif not origin and r.category is not None and r.source_ids:
                    memories.append(r)
            if not cursor:
                return memories, profiles

    def _groups(
        self, tenant: str, user_id: str, memories: list[MemoryRecord]
    ) -> dict[tuple[str, str], list[MemoryRecord]]:
        """Memories by (the speaker of the turn each came from, its category)."""
        turn_ids = {stm_memory_id(tenant, user_id, r.source_ids[0]): r for r in memories}
        turns = self.store.get_many(tenant, user_id, list(turn_ids))
        groups: dict[tuple[str, str], list[MemoryRecord]] = {}
        for turn_id, memory in turn_ids.items():
            turn = turns.get(turn_id)
            person = (turn.speaker if turn else None) or memory.speaker
            if person and memory.category is not None:
                groups.setdefault((person, memory.category), []).append(memory)
        return groups

    def _write(
        self,
        tenant: str,
        user_id: str,
        key: str,
        person: str,
        category: str,
        items: list[MemoryRecord],
        existing: MemoryRecord | None,
        now: datetime,
        report: ProfileReport,
        fence: Fence | None,
    ) -> None:
        content = profile_text(person, category, items)
        sources = list(dict.fromkeys(s for item in items for s in item.source_ids))
        when = max((i.event_time for i in items if i.event_time), default=None)
        if existing is not None:
            if existing.content == content:
                report.unchanged += 1
                return
            # A new version citing exactly the items it lists now (an update through the
            # extraction path would keep every source it ever had, and retire their turns).
            new = versions.new_version(
                existing,
                content=content,
                embedder=self.embedder,
                coarse_dim=self.config.coarse_dim,
                now=now,
                source_ids=sources,
                category=category,
                event_time=when,
            )
            try:
                self.store.supersede(tenant, user_id, existing.id, new, fence=fence)
            except Conflict:
                return  # another run refreshed it first; the next run sees its version
            written = [new]
        else:
            op = ExtractionOp(
                op="ADD",
                content=content,
                kind=Kind.FACT,
                category=category,
                event_time=when,
                source_ids=sources,
            )
            written = self.apply(
                self.store,
                self.embedder,
                self.config.coarse_dim,
                tenant,
                user_id,
                [op],
                session_id=None,
                scope=Scope.USER,
                now=now,
                metadata={"consolidation": PROFILE, "profile_key": key},
                fence=fence,
            )
        if self.on_written is not None and written:
            self.on_written(tenant, written)
        for record in written:
            report.memory_ids.append(record.id)
            if record.replaces_id:
                report.updated += 1
            else:
                report.written += 1
