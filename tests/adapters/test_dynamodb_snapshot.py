"""The vectorised filter of a DynamoDB snapshot agrees with the per-record rule on every filter."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from memstack.adapters.dynamodb import items
from memstack.adapters.dynamodb.snapshot import Snapshot
from memstack.models import Category, Kind, MemoryFilters, MemoryRecord, Scope, Tier

from ..strategies import memory_filters, metadata_of

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _records() -> list[MemoryRecord]:
    rng = np.random.default_rng(3)
    out = []
    combos = itertools.product(
        [Scope.USER, Scope.CONTEXT], [None, "s1", "s2"], [True, False], [True, False], [Tier.STM, Tier.LTM]
    )
    for i, (scope, session, current, deleted, tier) in enumerate(combos):
        out.append(
            MemoryRecord(
                tenant="t",
                user_id="u",
                content=f"memory {i}",
                scope=scope,
                session_id=session,
                is_current=current,
                deleted=deleted,
                tier=tier,
                kind=list(Kind)[i % 3],
                category=[None, Category.TRAVEL, Category.HEALTH][i % 3],
                created_at=T0 + timedelta(days=i),
                event_time=T0 + timedelta(days=50 - i) if i % 2 else None,
                embedding_coarse=[1.0, 0.0],
                metadata=metadata_of(rng),
            )
        )
    return out


RECORDS = _records()
SNAPSHOT = Snapshot("gen", [items.to_item(r) for r in RECORDS])

filters_strategy = memory_filters(T0, 60)


@settings(max_examples=150, deadline=None)
@given(filters=filters_strategy, search=st.booleans())
def test_mask_equals_the_per_record_rule(filters: MemoryFilters, search: bool) -> None:
    expected = [items.matches(r, filters, search=search) for r in RECORDS]
    assert SNAPSHOT.mask(filters, search=search).tolist() == expected


def test_search_results_only_contain_allowed_records() -> None:
    filters = MemoryFilters(session_id="s1", tier=Tier.LTM)
    allowed = {r.id for r in RECORDS if items.matches(r, filters, search=True)}
    hits = SNAPSHOT.vector_search(np.array([1.0, 0.0]), 100, filters)
    assert {h.id for h in hits} == allowed
    words = SNAPSHOT.bm25_search("memory", 100, filters)
    assert {h.id for h in words} == {i for i in allowed if SNAPSHOT.by_id[i].is_current}
