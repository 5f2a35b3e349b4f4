"""BM25 on PostgreSQL (postings, migration 7) is exactly FTS5's Okapi BM25 over the user's corpus.

The reference below ranks by brute force in Python: every document of the user, its lexemes and
their counts as the server tokenises them, the formula of ``search`` and the filters applied to
the records. After puts, supersedes, tombstones, metadata marks and another user's rows with the
same words, the store must return the same ids in the same order with the same scores.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from memstack.adapters.postgres.search import K1, B
from memstack.domain import versions
from memstack.domain.text import query_terms
from memstack.models import MemoryFilters, MemoryRecord, Scope, Tier

from .conftest import COARSE_DIM, EMB, record, record_statements

WORDS = [
    "tea",
    "coffee",
    "garlic",
    "ramen",
    "berlin",
    "lisbon",
    "cat",
    "dog",
    "piano",
    "guitar",
    "running",
    "swimming",
    "rain",
    "snow",
]


def _documents(store: Any, user: str) -> dict[str, dict[str, Any]]:
    """Every row of the user: its lexemes with their counts, its length and its flags."""
    rows = store.executor.query(
        f"""SELECT m.id, m.doc_len, m.is_current, m.deleted,
                   coalesce((SELECT jsonb_object_agg(t.lexeme, cardinality(t.positions))
                             FROM unnest(m.tsv) t), '{{}}')::text AS counts
            FROM {store.schema}.memories m WHERE m.tenant = 't1' AND m.user_id = :u""",
        {"u": user},
    )
    return {
        r["id"]: {
            "len": int(r["doc_len"]),
            "current": bool(r["is_current"]),
            "deleted": bool(r["deleted"]),
            "tf": json.loads(r["counts"]),
        }
        for r in rows
    }


def _lexemes(store: Any, query: str) -> list[str]:
    (row,) = store.executor.query(
        f"SELECT tsvector_to_array(to_tsvector('{store.schema}.memstack_english'::regconfig, :t)) AS l",
        {"t": " ".join(query_terms(query))},
    )
    return list(row["l"])


def _passes(record: MemoryRecord, filters: MemoryFilters) -> bool:
    """The filters this test uses, as the search applies them."""
    if record.deleted or (not filters.include_superseded and not record.is_current):
        return False
    if filters.tier is not None and record.tier != filters.tier:
        return False
    if filters.session_id is None:
        return record.scope == Scope.USER
    return record.scope == Scope.USER or record.session_id == filters.session_id


def brute_force(store: Any, query: str, k: int, filters: MemoryFilters) -> list[tuple[str, float]]:
    docs = _documents(store, "u1")
    live = [d for d in docs.values() if d["current"] and not d["deleted"]]
    n, avgdl = len(live), sum(d["len"] for d in live) / len(live)
    corpus = {
        i: d for i, d in docs.items() if not d["deleted"] and (d["current"] or filters.include_superseded)
    }
    lexemes = _lexemes(store, query)
    df = {lx: sum(1 for d in corpus.values() if lx in d["tf"]) for lx in lexemes}
    records = store.get_many("t1", "u1", list(corpus))
    scored = []
    for i, d in corpus.items():
        terms = [lx for lx in lexemes if lx in d["tf"]]
        if not terms or not _passes(records[i], filters):
            continue
        score = 0.0
        for lx in terms:
            tf = d["tf"][lx]
            idf = max(math.log((n - df[lx] + 0.5) / (df[lx] + 0.5)), 1e-6)
            score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * d["len"] / avgdl))
        scored.append((i, score))
    scored.sort(key=lambda hit: (-hit[1], hit[0]))
    return scored[:k]


@pytest.fixture
def history(make_store: Any) -> Any:
    """A user with 120 memories in two sessions, some replaced, some deleted; another user alike."""
    rng = random.Random(7)
    store = make_store()

    def text() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))

    mine = [
        record(
            text(),
            tier=rng.choice([Tier.STM, Tier.LTM]),
            scope=Scope.CONTEXT if i % 9 == 0 else Scope.USER,
            session_id=f"s{i % 2}",
        )
        for i in range(120)
    ]
    store.put([*mine, *(record(text(), user="u2") for _ in range(40))])
    for old in mine[:30:3]:
        newer = versions.new_version(old, content=text(), embedder=EMB, coarse_dim=COARSE_DIM)
        store.supersede("t1", "u1", old.id, newer)
    for old in mine[31:60:7]:
        tomb = versions.new_version(old, content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True)
        store.supersede("t1", "u1", old.id, tomb)
    store.mark("t1", "u1", [mine[61].id], consolidated=True)
    return store


@pytest.mark.parametrize(
    "filters",
    [
        MemoryFilters(),
        MemoryFilters(tier=Tier.LTM),
        MemoryFilters(include_superseded=True),
        MemoryFilters(session_id="s1"),
    ],
    ids=["default", "ltm", "with-superseded", "session"],
)
@pytest.mark.parametrize("k", [5, 200])
def test_bm25_is_the_brute_force_ranking(history: Any, filters: MemoryFilters, k: int) -> None:
    for query in ("tea", "garlic ramen in Berlin", "the cat and the dog", "running swimming piano rain"):
        expected = brute_force(history, query, k, filters)
        got = history.bm25_search("t1", "u1", query, k, filters)
        assert [h.id for h in got] == [i for i, _ in expected], query
        for hit, (_, score) in zip(got, expected, strict=True):
            assert hit.score == pytest.approx(score, rel=1e-9), query


def test_an_erase_leaves_no_postings_and_the_other_user_is_ranked_alone(history: Any) -> None:
    history.erase_user("t1", "u1")
    left = history.executor.query(
        f"SELECT count(*) AS n FROM {history.schema}.postings WHERE tenant = 't1' AND user_id = 'u1'"
    )
    assert left[0]["n"] == 0 and history.bm25_search("t1", "u1", "tea", 5, MemoryFilters()) == []
    assert history.bm25_search("t1", "u2", " ".join(WORDS), 100, MemoryFilters())


@pytest.mark.parametrize(
    "filters",
    [MemoryFilters(), MemoryFilters(tier=Tier.LTM), MemoryFilters(include_superseded=True)],
    ids=["default", "ltm", "with-superseded"],
)
def test_bm25_with_counts_answers_both_in_one_statement(history: Any, filters: MemoryFilters) -> None:
    statements = record_statements(history)
    for text in ("tea", "garlic ramen in Berlin zebra", "the cat and the dog", "the and of", ""):
        statements.clear()
        hits, counts = history.bm25_with_counts("t1", "u1", text, 7, filters)
        assert len(statements) == 1, text
        assert hits == history.bm25_search("t1", "u1", text, 7, filters), text
        # The counts are always the current text's, whatever the filters let the ranking see.
        assert counts == history.term_counts("t1", "u1", text), text
    assert history.bm25_with_counts("t1", "nobody", "tea", 7, filters)[1].docs == 0
