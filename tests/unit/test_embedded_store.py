"""The embedded SQLite store: BM25, exact vector search, isolation, durability, hostile queries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain.vectors import coarse_prefix
from memstack.errors import BadRequest, Conflict
from memstack.models import MemoryFilters, MemoryRecord, Scope, Tier

EMB = HashingEmbedder(64)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(content: str, tenant: str = "t1", user: str = "u1", **kw: object) -> MemoryRecord:
    vec = EMB.embed([content])[0]
    return MemoryRecord(
        tenant=tenant,
        user_id=user,
        content=content,
        embedding_full=vec.tolist(),
        embedding_coarse=coarse_prefix(vec, 16).tolist(),
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def store(tmp_path: Path) -> EmbeddedMemoryStore:
    s = EmbeddedMemoryStore(Database(tmp_path / "m.sqlite3"))
    yield s
    s.close()


DOCS = [
    "I adopted a golden retriever puppy named Biscuit",
    "My favourite food is ramen with extra garlic",
    "I work as a nurse at the city hospital night shift",
    "We spent the summer hiking in the Swiss Alps",
    "I am learning to play jazz piano on weekends",
]


def test_bm25_ranks_the_obviously_best_document_first(store: EmbeddedMemoryStore) -> None:
    store.put([record(d) for d in DOCS])
    hits = store.bm25_search("t1", "u1", "what is the name of the retriever puppy?", 5, MemoryFilters())
    assert hits, "expected at least one BM25 hit"
    best = store.get("t1", "u1", hits[0].id)
    assert best is not None and "Biscuit" in best.content
    assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))


def test_vector_search_returns_the_exact_top_k_of_a_brute_force_check(store: EmbeddedMemoryStore) -> None:
    rng = np.random.default_rng(7)
    records = []
    for i in range(120):
        vec = rng.normal(size=32).astype(np.float32)
        vec /= np.linalg.norm(vec)
        records.append(
            MemoryRecord(
                tenant="t1",
                user_id="u1",
                content=f"doc {i}",
                embedding_full=vec.tolist(),
                embedding_coarse=vec.tolist(),
            )
        )
    store.put(records)
    query = rng.normal(size=32).astype(np.float32)
    query /= np.linalg.norm(query)
    hits = store.vector_search("t1", "u1", query, 10, MemoryFilters())
    brute = sorted(records, key=lambda r: -float(np.dot(np.asarray(r.embedding_coarse), query)))[:10]
    assert [h.id for h in hits] == [r.id for r in brute]
    assert hits[0].score == pytest.approx(
        float(np.dot(np.asarray(brute[0].embedding_coarse), query)), abs=1e-5
    )


def test_other_tenants_and_users_never_see_the_first_users_memories(store: EmbeddedMemoryStore) -> None:
    mine = record("my secret diary entry about Biscuit the puppy")
    store.put([mine, record("unrelated", user="u2"), record("unrelated", tenant="t2")])
    q = EMB.embed(["secret diary Biscuit puppy"])[0]
    for tenant, user in (("t2", "u1"), ("t1", "u2")):
        assert all(
            h.id != mine.id
            for h in store.bm25_search(tenant, user, "secret diary Biscuit", 10, MemoryFilters())
        )
        assert all(
            h.id != mine.id
            for h in store.vector_search(tenant, user, coarse_prefix(q, 16), 10, MemoryFilters())
        )
        assert store.get(tenant, user, mine.id) is None
        assert mine.id not in store.get_many(tenant, user, [mine.id])
        assert all(r.id != mine.id for r in store.list(tenant, user, MemoryFilters(), 50)[0])
    assert store.get("t1", "u1", mine.id) is not None


def test_data_survives_closing_and_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "durable.sqlite3"
    first = EmbeddedMemoryStore(Database(path))
    r = record("I keep my passport in the blue drawer")
    first.put([r])
    first.close()
    second = EmbeddedMemoryStore(Database(path))
    try:
        got = second.get("t1", "u1", r.id)
        assert got is not None and got.content == r.content
        assert second.bm25_search("t1", "u1", "passport", 5, MemoryFilters())[0].id == r.id
        assert np.allclose(second.embeddings("t1", "u1", [r.id])[r.id], r.embedding_full)
    finally:
        second.close()


@pytest.mark.parametrize(
    "query",
    [
        'he said "hello',
        "Caroline's dog isn't here",
        "cats AND dogs OR NOT NEAR(x y) * ^ : - +",
        "NEAR",
        "🐶🎉 emoji only",
        "a" * 10_000,
        "word " * 2_000,
        "",
        "   ",
        "'); DROP TABLE memories; --",
    ],
)
def test_hostile_queries_do_not_crash(store: EmbeddedMemoryStore, query: str) -> None:
    store.put([record("Caroline's dog isn't here but the cats AND dogs are")])
    hits = store.bm25_search("t1", "u1", query, 5, MemoryFilters())
    assert isinstance(hits, list)
    assert store.list("t1", "u1", MemoryFilters(), 5)[0]  # the table is intact


def test_apostrophe_query_finds_the_text(store: EmbeddedMemoryStore) -> None:
    r = record("Caroline's sunflower painting")
    store.put([record("something else entirely"), r])
    assert store.bm25_search("t1", "u1", "Caroline's painting", 5, MemoryFilters())[0].id == r.id


def test_duplicate_id_is_a_conflict_and_changes_nothing(store: EmbeddedMemoryStore) -> None:
    r = record("first text")
    store.put([r])
    with pytest.raises(Conflict):
        store.put([r.model_copy(update={"content": "second text"})])
    got = store.get("t1", "u1", r.id)
    assert got is not None and got.content == "first text"


def test_supersede_keeps_one_current_version(store: EmbeddedMemoryStore) -> None:
    old = record("I live in Tokyo")
    store.put([old])
    new = record("I live in Osaka", replaces_id=old.id, version=2)
    store.supersede("t1", "u1", old.id, new)
    assert store.get("t1", "u1", old.id).is_current is False  # type: ignore[union-attr]
    assert store.successor("t1", "u1", old.id).id == new.id  # type: ignore[union-attr]
    hits = store.bm25_search("t1", "u1", "live", 5, MemoryFilters())
    assert [h.id for h in hits] == [new.id]
    with pytest.raises(Conflict):
        store.supersede("t1", "u1", old.id, record("again", replaces_id=old.id))


def test_filters_and_scope_rules(store: EmbeddedMemoryStore) -> None:
    ctx = record("booked a table for the meeting", scope=Scope.CONTEXT, session_id="s1")
    stm = record("booked a flight", tier=Tier.STM, event_time=T0)
    store.put([ctx, stm])
    assert [h.id for h in store.bm25_search("t1", "u1", "booked", 5, MemoryFilters())] == [stm.id]
    in_session = store.bm25_search("t1", "u1", "booked", 5, MemoryFilters(session_id="s1"))
    assert {h.id for h in in_session} == {ctx.id, stm.id}
    assert store.bm25_search("t1", "u1", "booked", 5, MemoryFilters(session_id="s2"))[0].id == stm.id
    only_stm = store.bm25_search("t1", "u1", "booked", 5, MemoryFilters(tier=Tier.STM, session_id="s1"))
    assert [h.id for h in only_stm] == [stm.id]
    later = MemoryFilters(after=T0 + timedelta(days=1), session_id="s1")
    assert stm.id not in {h.id for h in store.bm25_search("t1", "u1", "booked", 5, later)}


def test_list_paginates_newest_first_with_a_cursor(store: EmbeddedMemoryStore) -> None:
    records = [record(f"note {i}", created_at=T0 + timedelta(minutes=i)) for i in range(7)]
    store.put(records)
    seen: list[str] = []
    cursor = None
    while True:
        page, cursor = store.list("t1", "u1", MemoryFilters(), 3, cursor)
        seen += [r.content for r in page]
        if cursor is None:
            break
    assert seen == [f"note {i}" for i in reversed(range(7))]
    with pytest.raises(BadRequest):
        store.list("t1", "u1", MemoryFilters(), 3, "not-a-cursor")


def test_erase_user_removes_only_that_user(store: EmbeddedMemoryStore) -> None:
    store.put([record("mine"), record("mine too"), record("theirs", user="u2")])
    assert store.erase_user("t1", "u1") == {"memories": 2}
    assert store.list("t1", "u1", MemoryFilters(), 10)[0] == []
    assert len(store.list("t1", "u2", MemoryFilters(), 10)[0]) == 1
    assert store.bm25_search("t1", "u1", "mine", 5, MemoryFilters()) == []


def test_vector_cache_sees_writes_from_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    reader = EmbeddedMemoryStore(Database(path))
    writer = EmbeddedMemoryStore(Database(path))
    try:
        writer.put([record("alpha beta")])
        q = coarse_prefix(EMB.embed(["gamma delta"])[0], 16)
        assert len(reader.vector_search("t1", "u1", q, 10, MemoryFilters())) == 1
        writer.put([record("gamma delta")])
        hits = reader.vector_search("t1", "u1", q, 10, MemoryFilters())
        assert len(hits) == 2
        assert reader.get("t1", "u1", hits[0].id).content == "gamma delta"  # type: ignore[union-attr]
    finally:
        reader.close()
        writer.close()
