"""The vectorised filter of a DynamoDB snapshot agrees with the per-record rule on every filter."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memstack.adapters.dynamodb import items
from memstack.adapters.dynamodb.snapshot import Snapshot
from memstack.domain import record_filter
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
                embedding_full=[1.0, 0.0],
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
    expected = [record_filter.matches(r, filters, search=search) for r in RECORDS]
    assert SNAPSHOT.mask(filters, search=search).tolist() == expected


def test_search_results_only_contain_allowed_records() -> None:
    filters = MemoryFilters(session_id="s1", tier=Tier.LTM)
    allowed = {r.id for r in RECORDS if record_filter.matches(r, filters, search=True)}
    hits = SNAPSHOT.vector_search(np.array([1.0, 0.0]), 100, filters)
    assert {h.id for h in hits} == allowed
    words = SNAPSHOT.bm25_search("memory", 100, filters)
    assert {h.id for h in words} == {i for i in allowed if SNAPSHOT.by_id[i].is_current}


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    vocabulary = [f"w{i}" for i in range(40)]
    return [" ".join(rng.choice(vocabulary, size=int(rng.integers(2, 9)))) for _ in range(n)]


def _brute_force_bm25(snapshot: Snapshot, query: str, filters: MemoryFilters) -> dict[str, float]:
    """BM25 from the formula over the live records the filters allow (no index at all)."""
    import math

    from memstack.domain.bm25 import K1, B
    from memstack.domain.text import bm25_document, query_terms, words

    live = [r for r in snapshot.records if r.is_current and not r.deleted]
    docs = {r.id: words(bm25_document(r.indexed_text)) for r in live}
    avg = sum(len(d) for d in docs.values()) / len(docs)
    out: dict[str, float] = {}
    for term in query_terms(query, stems=True):
        df = sum(term in d for d in docs.values())
        idf = math.log(1.0 + (len(docs) - df + 0.5) / (df + 0.5))
        for rid, d in docs.items():
            tf = d.count(term)
            if tf:
                out[rid] = out.get(rid, 0.0) + idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(d) / avg))
    allowed = {r.id for r in snapshot.records if record_filter.matches(r, filters, search=True)}
    return {rid: score for rid, score in out.items() if rid in allowed}


def test_a_snapshot_brought_forward_ranks_exactly_as_brute_force() -> None:
    """Writes applied to a snapshot (new rows, superseded and marked ones) = the formula over the records."""
    rng = np.random.default_rng(11)
    texts = _texts(rng, 400)
    vectors = rng.standard_normal((400, 6)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    records = [
        MemoryRecord(
            tenant="t",
            user_id="u",
            content=text,
            tier=Tier.LTM if i % 3 else Tier.STM,
            session_id="s1" if i % 5 == 0 else None,
            created_at=T0 + timedelta(minutes=i),
            embedding_full=vectors[i].tolist(),
        )
        for i, text in enumerate(texts)
    ]
    vector_of = {r.id: vectors[i] for i, r in enumerate(records)}
    snapshot = Snapshot("g0", [items.to_item(r) for r in records[:150]], seq=1, epoch="e")
    at = 150
    for step in range(2, 37):
        written = [items.to_item(r) for r in records[at : at + 7]]
        at += 7
        older = [r for r in snapshot.records if r.is_current][: step % 3]
        retired = [items.to_item(r.model_copy(update={"is_current": False})) for r in older]
        marked = [
            items.to_item(r.model_copy(update={"metadata": {"consolidated": True}}))
            for r in snapshot.records[step : step + 2]
        ]
        snapshot = snapshot.applied([*written, *retired, *marked], token=f"g{step}", seq=step, epoch="e")
    assert snapshot.size == at
    queries = ["w1 w2", "w3", "w7 w8 w9 w10", "nothing here"]
    for filters in (MemoryFilters(), MemoryFilters(tier=Tier.LTM, session_id="s1")):
        for query in queries:
            want = _brute_force_bm25(snapshot, query, filters)
            got = snapshot.bm25_search(query, len(snapshot.records), filters)
            assert {h.id for h in got} == set(want)
            for hit in got:
                assert hit.score == pytest.approx(want[hit.id], rel=1e-5)
            assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
        q = rng.standard_normal(6).astype(np.float32)
        allowed = [r for r in snapshot.records if record_filter.matches(r, filters, search=True)]
        exact = sorted(allowed, key=lambda r: -float(vector_of[r.id] @ q))
        hits = snapshot.vector_search(q, 10, filters)
        assert [h.id for h in hits] == [r.id for r in exact[:10]]
    # The same rows read from scratch (as a cold container would) answer the same.
    fresh = Snapshot("g", [items.to_item(r) for r in snapshot.records])
    for query in queries:
        assert snapshot.bm25_search(query, 50, MemoryFilters()) == fresh.bm25_search(
            query, 50, MemoryFilters()
        )
