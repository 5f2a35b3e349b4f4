"""The ``MemoryStore`` port contract, run against every backend (see conftest.py for the list).

A backend passes when it behaves like the embedded store on everything the
domain relies on: records, versions, listing, scopes, search and isolation.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain import versions
from memstack.domain.vectors import coarse_prefix
from memstack.errors import BadRequest, Conflict
from memstack.models import Category, Kind, MemoryFilters, MemoryRecord, Scope, Tier
from memstack.ports.store import (
    HybridCandidates,
    ReadView,
    RecordsWithVectors,
    RescoredCandidates,
    SourcesInOneRead,
    pinned,
)

from .conftest import COARSE_DIM, FULL_DIM

EMB = HashingEmbedder(FULL_DIM)
T0 = datetime(2026, 1, 1, tzinfo=UTC)

DOCS = [
    "I adopted a golden retriever puppy named Biscuit",
    "My favourite food is ramen with extra garlic",
    "I work as a nurse at the city hospital night shift",
    "We spent the summer hiking in the Swiss Alps",
    "I am learning to play jazz piano on weekends",
]


def rec(content: str, tenant: str = "t1", user: str = "u1", minutes: int = 0, **kw: Any) -> MemoryRecord:
    vec = EMB.embed([content])[0]
    kw.setdefault("created_at", T0 + timedelta(minutes=minutes))
    return MemoryRecord(
        tenant=tenant,
        user_id=user,
        content=content,
        embedding_full=vec.tolist(),
        embedding_coarse=coarse_prefix(vec, COARSE_DIM).tolist(),
        **kw,
    )


def put_docs(store: Any, tenant: str = "t1", user: str = "u1") -> list[MemoryRecord]:
    records = [rec(d, tenant, user, minutes=i) for i, d in enumerate(DOCS)]
    store.put(records)
    return records


def content_of(store: Any, memory_id: str, tenant: str = "t1", user: str = "u1") -> str:
    record = store.get(tenant, user, memory_id)
    assert record is not None
    return str(record.content)


# ----------------------------------------------------------------------------- records
def test_put_then_get_round_trips_every_field(store: Any) -> None:
    original = rec(
        "Alex moved to Lisbon in March",
        session_id="s1",
        scope=Scope.CONTEXT,
        tier=Tier.STM,
        kind=Kind.EVENT,
        category=Category.TRAVEL,
        speaker="Alex",
        event_time=T0 - timedelta(days=3),
        search_text="Alex: Alex moved to Lisbon in March",
        source_ids=["m1", "m2"],
        metadata={"role": "user", "weight": 0.5, "nested": {"a": [1, 2]}},
    )
    store.put([original])
    got = store.get("t1", "u1", original.id)
    assert got is not None
    expected = original.model_dump(exclude={"embedding_full", "embedding_coarse"})
    assert got.model_dump(exclude={"embedding_full", "embedding_coarse"}) == expected
    assert store.get("t1", "u1", "no-such-id") is None


def test_put_of_an_existing_id_raises_conflict_and_keeps_the_original(store: Any) -> None:
    first = rec("the original text")
    store.put([first])
    with pytest.raises(Conflict):
        store.put([first.model_copy(update={"content": "a different text"})])
    assert content_of(store, first.id) == "the original text"


def test_get_many_returns_the_found_subset(store: Any) -> None:
    records = put_docs(store)
    wanted = [records[0].id, records[3].id, "missing"]
    got = store.get_many("t1", "u1", wanted)
    assert set(got) == {records[0].id, records[3].id}
    assert got[records[3].id].content == DOCS[3]
    assert store.get_many("t1", "u1", []) == {}


def test_embeddings_returns_the_full_vectors(store: Any) -> None:
    records = put_docs(store)
    got = store.embeddings("t1", "u1", [records[1].id, records[2].id])
    assert set(got) == {records[1].id, records[2].id}
    np.testing.assert_allclose(got[records[1].id], np.asarray(records[1].embedding_full), rtol=1e-6)
    assert got[records[1].id].shape == (FULL_DIM,)


# ---------------------------------------------------------------------------- versions
def test_supersede_retires_the_old_version_and_links_the_new(store: Any) -> None:
    old = rec("I live in Berlin")
    store.put([old])
    new = versions.new_version(
        old, content="I live in Lisbon", embedder=EMB, coarse_dim=COARSE_DIM, now=T0 + timedelta(days=1)
    )
    store.supersede("t1", "u1", old.id, new)
    old_now = store.get("t1", "u1", old.id)
    assert old_now is not None and not old_now.is_current
    assert old_now.superseded_at == new.created_at
    new_now = store.get("t1", "u1", new.id)
    assert new_now is not None and new_now.is_current
    assert (new_now.version, new_now.replaces_id) == (2, old.id)
    assert store.successor("t1", "u1", old.id).id == new.id
    assert store.successor("t1", "u1", new.id) is None
    chain = versions.history(store, "t1", "u1", old.id)
    assert [r.id for r in chain] == [old.id, new.id]


def test_histories_walk_every_chain_together_as_history_walks_each(store: Any) -> None:
    a1, b, c = rec("I live in Berlin"), rec("I drink coffee", minutes=1), rec("a fact of u2", user="u2")
    store.put([a1, b, c])
    a2 = versions.new_version(a1, content="I live in Lisbon", embedder=EMB, coarse_dim=COARSE_DIM, now=T0)
    store.supersede("t1", "u1", a1.id, a2)
    a3 = versions.new_version(a2, content="I live in Porto", embedder=EMB, coarse_dim=COARSE_DIM, now=T0)
    store.supersede("t1", "u1", a2.id, a3)
    middle, alone = store.get("t1", "u1", a2.id), store.get("t1", "u1", b.id)
    assert middle is not None and alone is not None

    chains = versions.histories(store, "t1", "u1", [middle, alone, middle])

    assert [[r.id for r in chain] for chain in chains] == [
        [a1.id, a2.id, a3.id],
        [b.id],
        [a1.id, a2.id, a3.id],
    ]
    assert chains[0] == versions.history(store, "t1", "u1", a2.id)
    assert versions.successors(store, "t1", "u1", [a1.id, a2.id, a3.id, b.id, "nope"]) == {
        a1.id: store.successor("t1", "u1", a1.id),
        a2.id: store.successor("t1", "u1", a2.id),
    }
    assert versions.successors(store, "t1", "u2", [a1.id, c.id]) == {}  # scoped by user


def test_supersede_of_a_version_that_is_no_longer_current_raises_conflict(store: Any) -> None:
    old = rec("I drink coffee")
    store.put([old])
    first = versions.new_version(old, content="I drink tea", embedder=EMB, coarse_dim=COARSE_DIM)
    store.supersede("t1", "u1", old.id, first)
    loser = versions.new_version(old, content="I drink water", embedder=EMB, coarse_dim=COARSE_DIM)
    with pytest.raises(Conflict):
        store.supersede("t1", "u1", old.id, loser)
    assert store.get("t1", "u1", loser.id) is None
    with pytest.raises(Conflict):
        store.supersede("t1", "u1", "never-existed", rec("orphan"))


def test_supersede_across_users_is_refused(store: Any) -> None:
    old = rec("a fact of user one")
    store.put([old])
    foreign = rec("a fact of someone else", user="u2")
    with pytest.raises(BadRequest):
        store.supersede("t1", "u1", old.id, foreign)


def test_tombstones_leave_search_and_listing_but_stay_in_history(store: Any) -> None:
    records = put_docs(store)
    tomb = versions.new_version(records[0], content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True)
    store.supersede("t1", "u1", records[0].id, tomb)
    listed, _ = store.list("t1", "u1", MemoryFilters(include_superseded=True), 50)
    assert tomb.id not in {r.id for r in listed}
    assert records[0].id not in {
        h.id for h in store.bm25_search("t1", "u1", "retriever puppy", 5, MemoryFilters())
    }
    vec_ids = {h.id for h in store.vector_search("t1", "u1", _coarse(DOCS[0]), 5, MemoryFilters())}
    assert records[0].id not in vec_ids and tomb.id not in vec_ids
    assert [r.id for r in versions.history(store, "t1", "u1", tomb.id)] == [records[0].id, tomb.id]


def test_find_by_source_returns_every_version_and_tier(store: Any) -> None:
    stm = rec("raw turn", tier=Tier.STM, source_ids=["msg-1"])
    ltm = rec("distilled fact", minutes=1, source_ids=["msg-1", "msg-2"])
    other = rec("unrelated", minutes=2, source_ids=["msg-3"])
    store.put([stm, ltm, other])
    assert {r.id for r in store.find_by_source("t1", "u1", "msg-1")} == {stm.id, ltm.id}
    assert [r.id for r in store.find_by_source("t1", "u1", "msg-2")] == [ltm.id]
    assert store.find_by_source("t1", "u1", "msg-9") == []
    assert store.find_by_source("t1", "u2", "msg-1") == []


def test_mark_sets_metadata_and_counts_only_changes(store: Any) -> None:
    records = put_docs(store)
    ids = [records[0].id, records[1].id, "missing"]
    assert store.mark("t1", "u1", ids, consolidated=True) == 2
    assert store.mark("t1", "u1", ids, consolidated=True) == 0
    got = store.get("t1", "u1", records[0].id)
    assert got is not None and got.metadata["consolidated"] is True
    assert store.mark("t2", "u1", [records[2].id], consolidated=True) == 0


# ----------------------------------------------------------------------------- listing
def test_list_is_newest_first_current_only_with_filters(store: Any) -> None:
    a = rec("fact a", minutes=1, kind=Kind.FACT, category=Category.HEALTH)
    b = rec("event b", minutes=2, kind=Kind.EVENT, event_time=T0 + timedelta(days=10))
    c = rec("stm c", minutes=3, tier=Tier.STM)
    store.put([a, b, c])
    newer = versions.new_version(
        a, content="fact a2", embedder=EMB, coarse_dim=COARSE_DIM, now=T0 + timedelta(minutes=4)
    )
    store.supersede("t1", "u1", a.id, newer)

    def ids(**kw: Any) -> list[str]:
        return [r.id for r in store.list("t1", "u1", MemoryFilters(**kw), 50)[0]]

    assert ids() == [newer.id, c.id, b.id]
    assert ids(include_superseded=True) == [newer.id, c.id, b.id, a.id]
    assert ids(kind=Kind.EVENT) == [b.id]
    assert ids(tier=Tier.STM) == [c.id]
    assert ids(category=Category.HEALTH) == [newer.id]
    # after/before compare the event time when there is one, else the creation time.
    assert ids(after=T0 + timedelta(days=5)) == [b.id]
    assert ids(before=T0 + timedelta(minutes=3, seconds=30)) == [c.id]


def test_list_cursor_pages_through_everything_once(store: Any) -> None:
    records = [rec(f"memory number {i}", minutes=i % 7) for i in range(23)]
    store.put(records)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = store.list("t1", "u1", MemoryFilters(), 5, cursor)
        seen += [r.id for r in page]
        pages += 1
        if cursor is None:
            break
    assert pages == 5
    assert sorted(seen) == sorted(r.id for r in records)
    created = [store.get("t1", "u1", i).created_at for i in seen]
    assert created == sorted(created, reverse=True)


def event_order_of(store: Any, ids: list[str]) -> list[datetime]:
    """The time ``order="event_time"`` sorts by: the event time, else the creation time."""
    return [(r.event_time or r.created_at) for r in (store.get("t1", "u1", i) for i in ids)]


def test_list_by_event_time_is_newest_event_first_falling_back_to_created_at(store: Any) -> None:
    planned = rec("planned trip", minutes=1, kind=Kind.EVENT, event_time=T0 + timedelta(days=30))
    undated = rec("likes tea", minutes=2)  # no event time: ordered by its creation time
    childhood = rec("grew up in Lyon", minutes=3, event_time=T0 - timedelta(days=9000))
    last_week = rec("ran a marathon", minutes=4, kind=Kind.EVENT, event_time=T0 - timedelta(days=7))
    old = rec("works at a bakery", minutes=5, event_time=T0 + timedelta(days=40))
    store.put([planned, undated, childhood, last_week, old])
    newer = versions.new_version(
        old,
        content="works at a library",
        embedder=EMB,
        coarse_dim=COARSE_DIM,
        now=T0 + timedelta(minutes=6),
        event_time=T0 + timedelta(days=35),
    )
    store.supersede("t1", "u1", old.id, newer)

    def ids(order: str = "event_time", **kw: Any) -> list[str]:
        return [r.id for r in store.list("t1", "u1", MemoryFilters(**kw), 50, None, order)[0]]

    assert ids() == [newer.id, planned.id, undated.id, last_week.id, childhood.id]
    assert ids("created_at") == [newer.id, last_week.id, childhood.id, undated.id, planned.id]
    # The filters apply as in the default order; a superseded version takes its own place.
    assert ids(kind=Kind.EVENT) == [planned.id, last_week.id]
    assert ids(include_superseded=True) == [
        old.id,
        newer.id,
        planned.id,
        undated.id,
        last_week.id,
        childhood.id,
    ]
    assert ids(before=T0) == [last_week.id, childhood.id]


def test_list_by_event_time_pages_through_ties_once_in_the_one_page_order(store: Any) -> None:
    # Many records share an event time (a day of i % 4), a few have none (their minute):
    # the cursor must neither repeat nor skip a record inside a tie.
    records = [
        rec(f"memory number {i}", minutes=i, event_time=None if i % 5 == 0 else T0 + timedelta(days=i % 4))
        for i in range(23)
    ]
    store.put(records)
    whole = [r.id for r in store.list("t1", "u1", MemoryFilters(), 100, None, "event_time")[0]]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = store.list("t1", "u1", MemoryFilters(), 5, cursor, "event_time")
        seen += [r.id for r in page]
        pages += 1
        if cursor is None:
            break
    assert pages == 5
    assert seen == whole
    assert sorted(seen) == sorted(r.id for r in records)
    times = event_order_of(store, seen)
    assert times == sorted(times, reverse=True)


def test_list_rejects_a_cursor_it_did_not_issue(store: Any) -> None:
    put_docs(store)
    for bad in ("not-base64!!", base64.urlsafe_b64encode(b"garbage").decode()):
        with pytest.raises(BadRequest):
            store.list("t1", "u1", MemoryFilters(), 2, bad)


# ------------------------------------------------------------------------------ scopes
def test_context_memories_are_searchable_only_inside_their_session(store: Any) -> None:
    user_scoped = rec("the user loves sailing boats")
    ctx = rec("the project codename is sailing falcon", minutes=1, scope=Scope.CONTEXT, session_id="s1")
    store.put([user_scoped, ctx])

    def bm25(session: str | None) -> set[str]:
        return {h.id for h in store.bm25_search("t1", "u1", "sailing", 10, MemoryFilters(session_id=session))}

    def vec(session: str | None) -> set[str]:
        hits = store.vector_search("t1", "u1", _coarse("sailing"), 10, MemoryFilters(session_id=session))
        return {h.id for h in hits}

    assert bm25("s1") == {user_scoped.id, ctx.id}
    assert bm25("s2") == {user_scoped.id}
    assert bm25(None) == {user_scoped.id}
    assert vec("s1") == {user_scoped.id, ctx.id}
    assert vec("s2") == {user_scoped.id}
    assert vec(None) == {user_scoped.id}
    # A listing without a session shows both; inside another session, only the USER one.
    assert {r.id for r in store.list("t1", "u1", MemoryFilters(), 10)[0]} == {user_scoped.id, ctx.id}
    assert {r.id for r in store.list("t1", "u1", MemoryFilters(session_id="s2"), 10)[0]} == {user_scoped.id}


# ------------------------------------------------------------------------------- BM25
def test_bm25_puts_the_obviously_best_document_first(store: Any) -> None:
    put_docs(store)
    hits = store.bm25_search("t1", "u1", "what is the name of the retriever puppy?", 5, MemoryFilters())
    assert hits and "Biscuit" in content_of(store, hits[0].id)
    assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))
    hits = store.bm25_search("t1", "u1", "jazz piano", 1, MemoryFilters())
    assert len(hits) == 1 and "piano" in content_of(store, hits[0].id)


def test_bm25_indexes_search_text_and_honours_filters(store: Any) -> None:
    turn = rec(
        "sounds lovely", tier=Tier.STM, search_text="Caroline: sounds lovely (about the pottery class)"
    )
    fact = rec("Caroline took a pottery class", minutes=1, tier=Tier.LTM)
    store.put([turn, fact])
    assert {h.id for h in store.bm25_search("t1", "u1", "pottery", 5, MemoryFilters())} == {turn.id, fact.id}
    ltm_only = store.bm25_search("t1", "u1", "pottery", 5, MemoryFilters(tier=Tier.LTM))
    assert [h.id for h in ltm_only] == [fact.id]


def _counts(store: Any, query: str, tenant: str = "t1", user: str = "u1") -> tuple[int, list[int]]:
    """The user's searchable records and the query terms' document frequencies, ascending (the terms
    are each backend's own: words, stems or lexemes)."""
    counts = store.term_counts(tenant, user, query)
    return counts.docs, sorted(counts.df.values())


def test_term_counts_are_the_users_own_document_frequencies_of_current_text(store: Any) -> None:
    records = put_docs(store)
    query = "Is the retriever puppy fond of zebra ramen?"
    assert _counts(store, query) == (5, [0, 0, 1, 1, 1])
    # Another user's and another tenant's records, with every one of the query's words, change nothing.
    for tenant, user in (("t1", "u2"), ("t2", "u1")):
        store.put([rec(f"zebra ramen retriever puppy {i}", tenant, user, minutes=i) for i in range(3)])
        assert _counts(store, query, tenant, user) == (3, [0, 3, 3, 3, 3])
    assert _counts(store, query) == (5, [0, 0, 1, 1, 1])
    # Only current text counts: a replaced version and a deleted one leave both figures.
    noodles = versions.new_version(
        records[1], content="I now prefer udon", embedder=EMB, coarse_dim=COARSE_DIM
    )
    store.supersede("t1", "u1", records[1].id, noodles)
    tomb = versions.new_version(records[0], content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True)
    store.supersede("t1", "u1", records[0].id, tomb)
    assert _counts(store, query) == (4, [0, 0, 0, 0, 0])
    assert _counts(store, "udon") == (4, [1])
    assert store.term_counts("t1", "nobody", query).docs == 0


@pytest.mark.parametrize(
    "query",
    [
        'he said "hello',
        "what's Biscuit's favourite toy?",
        "retriever AND OR NOT NEAR(puppy) * : ^ -",
        "title:puppy {curly} [square] (paren) \\ / ~2",
        "🐶 puppy 🎹",
        "the and of",
        "",
        "   ",
        "x" * 10_000,
        "puppy " * 2_000,
    ],
)
def test_hostile_queries_never_crash(store: Any, query: str) -> None:
    put_docs(store)
    hits = store.bm25_search("t1", "u1", query, 5, MemoryFilters())
    assert isinstance(hits, list)
    if "puppy" in query:
        assert hits and "Biscuit" in content_of(store, hits[0].id)


# ------------------------------------------------------------------------------ vector
def _coarse(text: str) -> np.ndarray:
    return coarse_prefix(EMB.embed([text])[0], COARSE_DIM)


def random_record(rng: np.random.Generator, content: str, **kw: Any) -> MemoryRecord:
    """A record of t1/u1 with a random unit vector (brute-force top-k tests)."""
    full = rng.normal(size=FULL_DIM).astype(np.float32)
    full /= np.linalg.norm(full)
    return MemoryRecord(
        tenant="t1",
        user_id="u1",
        content=content,
        created_at=T0,
        embedding_full=full.tolist(),
        embedding_coarse=coarse_prefix(full, COARSE_DIM).tolist(),
        **kw,
    )


def test_vector_search_is_the_exact_top_k_of_brute_force(store: Any) -> None:
    rng = np.random.default_rng(11)
    records = [random_record(rng, f"doc {i}") for i in range(60)]
    store.put(records)
    query = coarse_prefix(rng.normal(size=FULL_DIM).astype(np.float32), COARSE_DIM)
    hits = store.vector_search("t1", "u1", query, 10, MemoryFilters())
    matrix = np.asarray([r.embedding_coarse for r in records], dtype=np.float32)
    expected = np.argsort(-(matrix @ query))[:10]
    assert [h.id for h in hits] == [records[i].id for i in expected]
    np.testing.assert_allclose([h.score for h in hits], (matrix @ query)[expected], atol=1e-4)


def test_vector_search_honours_filters(store: Any) -> None:
    stm = rec("my dog Biscuit chews shoes", tier=Tier.STM)
    ltm = rec("my dog Biscuit is a retriever", minutes=1)
    store.put([stm, ltm])
    hits = store.vector_search("t1", "u1", _coarse("dog Biscuit"), 10, MemoryFilters(tier=Tier.LTM))
    assert [h.id for h in hits] == [ltm.id]


# ------------------------------------------------------------------ erase and isolation
def test_erase_user_deletes_everything_of_that_user_only(store: Any) -> None:
    mine = put_docs(store, "t1", "u1")
    theirs = put_docs(store, "t1", "u2")
    tomb = versions.new_version(mine[0], content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True)
    store.supersede("t1", "u1", mine[0].id, tomb)
    counts = store.erase_user("t1", "u1")
    assert counts["memories"] == len(DOCS) + 1
    assert store.get("t1", "u1", mine[1].id) is None
    assert store.list("t1", "u1", MemoryFilters(include_superseded=True), 50) == ([], None)
    assert store.bm25_search("t1", "u1", "puppy", 5, MemoryFilters()) == []
    assert store.vector_search("t1", "u1", _coarse(DOCS[0]), 5, MemoryFilters()) == []
    assert store.get("t1", "u2", theirs[1].id) is not None
    assert len(store.list("t1", "u2", MemoryFilters(), 50)[0]) == len(DOCS)
    # Writing again after an erase works and is seen by search.
    again = rec("a fresh start with a kitten")
    store.put([again])
    assert [h.id for h in store.bm25_search("t1", "u1", "kitten", 5, MemoryFilters())] == [again.id]


@pytest.mark.parametrize("other", [("t2", "u1"), ("t1", "u2")], ids=["other-tenant", "other-user"])
def test_tenants_and_users_never_see_each_other(store: Any, other: tuple[str, str]) -> None:
    mine = put_docs(store, "t1", "u1")
    tenant, user = other
    assert store.get(tenant, user, mine[0].id) is None
    assert store.get_many(tenant, user, [r.id for r in mine]) == {}
    assert store.embeddings(tenant, user, [r.id for r in mine]) == {}
    assert store.list(tenant, user, MemoryFilters(include_superseded=True), 50) == ([], None)
    assert store.bm25_search(tenant, user, "retriever puppy", 5, MemoryFilters()) == []
    assert store.vector_search(tenant, user, _coarse(DOCS[0]), 5, MemoryFilters()) == []
    assert store.find_by_source(tenant, user, "anything") == []
    assert store.successor(tenant, user, mine[0].id) is None
    assert store.mark(tenant, user, [mine[0].id], consolidated=True) == 0
    new = rec("hijack", tenant, user)
    with pytest.raises(Conflict):
        store.supersede(tenant, user, mine[0].id, new)
    assert store.erase_user(tenant, user)["memories"] == 0
    assert len(store.list("t1", "u1", MemoryFilters(), 50)[0]) == len(DOCS)


def test_combined_candidates_equal_the_two_separate_searches(store: Any) -> None:
    if not isinstance(store, HybridCandidates):
        pytest.skip("this backend has no combined hybrid_candidates search")
    put_docs(store)
    filters = MemoryFilters()
    q = _coarse("retriever puppy")
    bm25, vec = store.hybrid_candidates("t1", "u1", "the retriever puppy", q, 3, 4, filters)
    assert bm25 == store.bm25_search("t1", "u1", "the retriever puppy", 3, filters)
    assert vec == store.vector_search("t1", "u1", q, 4, filters)
    assert bm25 and len(vec) == 4


# ------------------------------------------------------------------------- read views
def _reads(store: Any, tenant: str, user: str, ids: list[str]) -> dict[str, Any]:
    """Every read a search makes, as comparable values."""
    q = _coarse("retriever puppy")
    return {
        "bm25": store.bm25_search(tenant, user, "the retriever puppy", 3, MemoryFilters()),
        "vector": store.vector_search(tenant, user, q, 4, MemoryFilters()),
        "get": store.get(tenant, user, ids[0]),
        "get_many": store.get_many(tenant, user, ids),
        "embeddings": {k: v.tolist() for k, v in store.embeddings(tenant, user, ids).items()},
        "successor": store.successor(tenant, user, ids[0]),
        "by_source": store.find_by_source(tenant, user, "m1"),
        "list": store.list(tenant, user, MemoryFilters(include_superseded=True), 50),
    }


def test_a_read_view_answers_as_the_store_and_only_for_its_user(store: Any) -> None:
    if not isinstance(store, ReadView):
        pytest.skip("this backend has no read view (the pipeline reads the store directly)")
    mine = [rec(d, minutes=i, source_ids=["m1"]) for i, d in enumerate(DOCS)]
    theirs = [rec(d, "t1", "u2", minutes=i, source_ids=["m1"]) for i, d in enumerate(DOCS)]
    store.put(mine + theirs)
    new = versions.new_version(mine[0], content="my retriever Biscuit", embedder=EMB, coarse_dim=COARSE_DIM)
    store.supersede("t1", "u1", mine[0].id, new)
    my_ids = [r.id for r in mine] + [new.id]
    view = pinned(store, "t1", "u1")
    assert _reads(view, "t1", "u1", my_ids) == _reads(store, "t1", "u1", my_ids)
    # Asked about another user or tenant, a view answers for them, never from its own user's state.
    their_ids = [r.id for r in theirs]
    assert _reads(view, "t1", "u2", their_ids) == _reads(store, "t1", "u2", their_ids)
    assert view.get("t1", "u2", my_ids[1]) is None and view.get_many("t2", "u1", my_ids) == {}
    assert view.embeddings("t1", "u2", my_ids) == {}
    # A view is one state: a later write is seen by the next view, not by this one.
    later = rec("another retriever puppy story", minutes=9)
    store.put([later])
    assert later.id not in {
        h.id for h in view.bm25_search("t1", "u1", "retriever puppy", 10, MemoryFilters())
    }
    fresh = pinned(store, "t1", "u1")
    assert later.id in {h.id for h in fresh.bm25_search("t1", "u1", "retriever puppy", 10, MemoryFilters())}


def test_rescored_candidates_rank_the_search_hits_by_their_full_vectors(store: Any) -> None:
    if not isinstance(store, RescoredCandidates):
        pytest.skip("this backend ships the candidates' vectors to be ranked in the pipeline")
    rng = np.random.default_rng(5)
    records = [random_record(rng, f"doc {i}") for i in range(40)]
    # the query is near record 0, which has no full vector: a coarse hit the ranking leaves out
    full_query = np.asarray(records[0].embedding_full, dtype=np.float32) + rng.normal(size=FULL_DIM) * 0.05
    full_query = (full_query / np.linalg.norm(full_query)).astype(np.float32)
    records[0] = records[0].model_copy(update={"embedding_full": None})
    store.put(records)
    coarse = coarse_prefix(full_query, COARSE_DIM)
    hits = store.vector_search("t1", "u1", coarse, 25, MemoryFilters())
    vectors = store.embeddings("t1", "u1", [h.id for h in hits])
    ids = [h.id for h in hits if h.id in vectors]
    scores = np.asarray([vectors[i] for i in ids], dtype=np.float32) @ full_query
    order = np.argsort(-scores, kind="stable")  # the pipeline's ranking: ties keep the coarse order

    rescored = store.rescored_candidates("t1", "u1", coarse, full_query, 25, MemoryFilters())

    assert [h.id for h in rescored] == [ids[i] for i in order]
    assert len(rescored) < len(hits)  # the row without a full vector was a coarse hit, and is gone
    np.testing.assert_allclose([h.score for h in rescored], scores[order], atol=1e-6)
    assert store.rescored_candidates("t2", "u1", coarse, full_query, 25, MemoryFilters()) == []


def test_records_with_vectors_equal_get_many_and_embeddings(store: Any) -> None:
    if not isinstance(store, RecordsWithVectors):
        pytest.skip("this backend reads records and vectors separately")
    records = put_docs(store)
    no_vector = rec("a memory without a vector")
    store.put([no_vector.model_copy(update={"embedding_full": None})])
    ids = [records[2].id, "missing", records[0].id, no_vector.id, records[1].id]
    wanted = [records[0].id, no_vector.id, "missing"]  # records[1] and [2]: vectors the caller has

    got, vectors = store.records_with_vectors("t1", "u1", ids, wanted)

    assert got == store.get_many("t1", "u1", ids)
    expected = store.embeddings("t1", "u1", wanted)
    assert set(vectors) == set(expected) == {records[0].id}
    np.testing.assert_array_equal(vectors[records[0].id], expected[records[0].id])
    assert store.records_with_vectors("t2", "u1", ids, wanted) == ({}, {})
    assert store.records_with_vectors("t1", "u1", [], []) == ({}, {})


def test_sources_in_one_read_equal_one_read_each(store: Any) -> None:
    if not isinstance(store, SourcesInOneRead):
        pytest.skip("this backend reads sources one id at a time")
    stm = rec("raw turn", tier=Tier.STM, source_ids=["msg-1"])
    ltm = rec("distilled fact", minutes=1, source_ids=["msg-1", "msg-2"])
    other = rec("someone else's", user="u2", source_ids=["msg-1"])
    store.put([stm, ltm, other])
    asked = ["msg-1", "msg-2", "msg-9"]
    got = store.find_by_sources("t1", "u1", asked)
    assert got == {s: store.find_by_source("t1", "u1", s) for s in asked}
    assert [r.id for r in got["msg-1"]] == [stm.id, ltm.id] and got["msg-9"] == []
    assert store.find_by_sources("t2", "u1", asked) == {s: [] for s in asked}


def _summaries(
    store: Any, tenant: str = "t1", limit: int = 50
) -> dict[str, tuple[int, int, datetime | None]]:
    page, cursor = store.users(tenant, limit)
    assert cursor is None
    return {u.user_id: (u.stm, u.ltm, u.last_write) for u in page}


def test_users_lists_the_tenants_users_with_live_counts_per_tier_and_the_last_write(store: Any) -> None:
    store.put([rec(d, user="ana", minutes=i) for i, d in enumerate(DOCS[:3])])
    store.put([rec("raw turn one", user="ana", minutes=9, tier=Tier.STM)])
    store.put([rec("a fact of bo", user="bo", minutes=4)])
    store.put([rec("another tenant's user", tenant="t2", user="cy", minutes=5)])
    assert _summaries(store) == {
        "ana": (1, 3, T0 + timedelta(minutes=9)),
        "bo": (0, 1, T0 + timedelta(minutes=4)),
    }
    assert list(_summaries(store, "t2")) == ["cy"]
    assert store.users("t3", 10) == ([], None)


def test_users_counts_follow_updates_deletes_and_erasure(store: Any) -> None:
    records = [rec(d, user="ana", minutes=i) for i, d in enumerate(DOCS[:2])]
    store.put(records)
    edited = versions.new_version(
        records[0],
        content="I adopted two puppies",
        embedder=EMB,
        coarse_dim=COARSE_DIM,
        now=T0 + timedelta(hours=1),
    )
    store.supersede("t1", "ana", records[0].id, edited)
    assert _summaries(store)["ana"] == (0, 2, T0 + timedelta(hours=1))
    tomb = versions.new_version(
        records[1],
        content=None,
        embedder=None,
        coarse_dim=COARSE_DIM,
        deleted=True,
        now=T0 + timedelta(hours=2),
    )
    store.supersede("t1", "ana", records[1].id, tomb)
    # A user whose memories are all deleted is still listed (its history is kept), with no live ones.
    store.supersede(
        "t1",
        "ana",
        edited.id,
        versions.new_version(
            edited,
            content=None,
            embedder=None,
            coarse_dim=COARSE_DIM,
            deleted=True,
            now=T0 + timedelta(hours=3),
        ),
    )
    assert _summaries(store)["ana"] == (0, 0, T0 + timedelta(hours=3))
    store.put([rec("a fact of bo", user="bo")])
    store.erase_user("t1", "ana")
    assert list(_summaries(store)) == ["bo"]


def test_users_pages_by_user_id_through_everyone_once(store: Any) -> None:
    names = ["u10", "u2", "A-first", "u1", "z.last", "m@x"]
    for i, name in enumerate(names):
        store.put([rec(f"fact number {i}", user=name, minutes=i)])
    seen: list[str] = []
    cursor = None
    for _ in range(len(names)):
        page, cursor = store.users("t1", 2, cursor)
        assert len(page) <= 2
        seen += [u.user_id for u in page]
        if cursor is None:
            break
    assert seen == sorted(names)  # byte order on every backend
