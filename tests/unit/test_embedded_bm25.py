"""The embedded store's BM25 from in-memory postings: FTS5's formula, the user's own collection.

Scores are FTS5's ``bm25()`` to the last bit over a table of the user's rows alone
(``fts5_reference``); they stay the user's own (another user's words change nothing), and
erasing the user leaves none of their words in any posting or memo.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memstack.adapters.embedded import fts
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.models import MemoryFilters, MemoryRecord, Tier

from tests.unit.fts5_reference import fts5_scores, indexed_text

# Stems that differ with a leading 'y', accents FTS5 folds, digits, a word past porter's
# 64 letters, words Python splits at (underscore, apostrophe), a word SQLite splits and
# Python does not (U+19B0 is no letter to unicode61), an empty search text.
TEXTS = [
    "Yesterday I was running to the yoga class, yes really",
    "Café crème at the café in Zürich; running runs ran",
    "My PIN is 2024 and my flight is LH_404 at 10:45",
    "x" * 70 + " supercalifragilisticexpialidocious generalizations",
    "She's studying nursing; nurses nursed the studies",
    "yarn yard yield your yours yourselves",
    "tea coffee tea coffee tea garden",
    "tea in ta\u19b0xi: one word to Python, two tokens to SQLite's tokenizer",
    "",
]
QUERIES = [
    "running yoga",
    "cafe zurich",
    "café crème",
    "2024 lh 404",
    "nurse study",
    "yes yesterday yield",
    "tea",
    "coffee garden tea",
    "x" * 70,
    "runs running ran",
    "nothing matches this",
]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = EmbeddedMemoryStore(Database(tmp_path / "m.sqlite3"))
    yield s
    s.close()


def _records(tenant: str, user: str, texts: list[str], *, copies: int = 3) -> list[MemoryRecord]:
    out = []
    for i in range(copies):
        for j, text in enumerate(texts):
            out.append(
                MemoryRecord(
                    tenant=tenant,
                    user_id=user,
                    content=f"{text} {' '.join(['tea'] * i)}" if text else "an assistant reply",
                    search_text="" if not text else None,
                    session_id=f"s{j % 2}" if j % 3 else None,
                    tier=Tier.LTM if j % 2 else Tier.STM,
                )
            )
    return out


def _fts5(store: EmbeddedMemoryStore, tenant: str, user: str, query: str, table: str) -> dict[str, float]:
    """FTS5's own scores (higher is better) of the user's rows, in a table of them alone, by id."""
    conn = store.db.read()
    scores = fts5_scores(conn, tenant, user, query, ltm=table == fts.LTM)
    ids = dict(conn.execute("SELECT rid, id FROM memories WHERE tenant = ? AND user_id = ?", (tenant, user)))
    return {ids[rid]: score for rid, score in scores.items()}


@pytest.mark.parametrize("tier", [None, Tier.LTM], ids=["all", "ltm"])
def test_a_user_alone_in_the_file_scores_exactly_as_fts5(
    store: EmbeddedMemoryStore, tier: Tier | None
) -> None:
    store.put(_records("t1", "u1", TEXTS))
    filters = MemoryFilters(tier=tier)
    table = fts.LTM if tier == Tier.LTM else fts.MAIN
    for query in QUERIES:
        got = {h.id: h.score for h in store.bm25_search("t1", "u1", query, 100, filters)}
        assert got == _fts5(store, "t1", "u1", query, table), query  # the same floats, not close ones


def test_another_users_words_change_nothing_of_my_scores(store: EmbeddedMemoryStore) -> None:
    """Tenant isolation in ranking: the collection BM25 ranks in is the user's own."""
    store.put(_records("t1", "me", TEXTS))
    before = {q: store.bm25_search("t1", "me", q, 100, MemoryFilters()) for q in QUERIES}
    # Others say my words over and over, in my tenant and in another one.
    for tenant, user in (("t1", "other"), ("t2", "me")):
        store.put(
            _records(tenant, user, ["tea tea tea running yoga", "cafe zurich nurse", *TEXTS], copies=20)
        )
    after = {q: store.bm25_search("t1", "me", q, 100, MemoryFilters()) for q in QUERIES}
    assert after == before
    assert any(before.values())


def test_erase_leaves_no_word_of_the_user_in_any_posting(store: EmbeddedMemoryStore) -> None:
    store.put(_records("t1", "u1", ["the secret is marzipan", "marzipan again"], copies=1))
    old = store.index("t1", "u1")
    assert store.bm25_search("t1", "u1", "marzipan", 10, MemoryFilters())
    store.erase_user("t1", "u1")
    assert store.bm25_search("t1", "u1", "marzipan", 10, MemoryFilters()) == []
    store.put(_records("t1", "u1", ["a new start"], copies=1))
    view = store.index("t1", "u1")
    assert view.text is not old.text
    words = set(view.text.stems.numbers) | set(view.text.stems.of([]))
    assert not any("marzipan" in w for w in words)
    assert store.bm25_search("t1", "u1", "marzipan", 10, MemoryFilters()) == []


def test_a_view_handed_out_never_scores_rows_written_after_it(store: EmbeddedMemoryStore) -> None:
    store.put(_records("t1", "u1", ["tea garden"], copies=1))
    old = store.index("t1", "u1")
    first = store.bm25_on(old, "tea", 10, MemoryFilters())
    store.put(_records("t1", "u1", ["tea tea", "tea garden party"], copies=1))
    again = store.bm25_on(old, "tea", 10, MemoryFilters())
    assert again.ids == first.ids and np.array_equal(again.scores, first.scores)
    assert len(store.bm25_search("t1", "u1", "tea", 10, MemoryFilters())) == 3


def test_superseded_and_deleted_rows_leave_the_collection(store: EmbeddedMemoryStore) -> None:
    from memstack.domain import versions

    records = _records("t1", "u1", ["tea garden", "tea", "coffee"], copies=1)
    store.put(records)
    new = versions.new_version(records[0], content="coffee garden", embedder=None, coarse_dim=8)
    store.supersede("t1", "u1", records[0].id, new)
    gone = versions.new_version(records[1], content=None, embedder=None, coarse_dim=8, deleted=True)
    store.supersede("t1", "u1", records[1].id, gone)
    for query in ("tea", "coffee garden"):
        got = {h.id: h.score for h in store.bm25_search("t1", "u1", query, 10, MemoryFilters())}
        assert got == _fts5(store, "t1", "u1", query, fts.MAIN)
    assert store.bm25_search("t1", "u1", "tea", 10, MemoryFilters()) == []


def test_stemming_is_sqlites_own() -> None:
    """Every word is tokenised by SQLite's FTS5 tokenizer, not by an imitation of it."""
    from memstack.adapters.embedded.postings import Stems

    stems = Stems()
    words = ["running", "yesterday", "café", "generalizations", "x" * 70, "2024"]
    own = sqlite3.connect(":memory:")
    own.execute(f"CREATE VIRTUAL TABLE t USING fts5 (text, tokenize = '{fts.TOKENIZER}')")
    own.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
    prefix = fts.owner_prefix(7)
    own.execute("INSERT INTO t (text) VALUES (?)", (indexed_text(prefix, " ".join(words)),))
    want = [term[len(prefix) :] for (term,) in own.execute("SELECT term FROM v ORDER BY offset")]
    memo = stems.of(words)
    terms = {number: term for term, number in stems.numbers.items()}
    assert [terms[t][fts.PREFIX_WIDTH :] for w in words for t in memo[w]] == want


def test_a_full_word_memo_starts_over_and_scores_stay_exact(
    store: EmbeddedMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-user memo of words is bounded: starting over loses no word a write or a search needs."""
    from memstack.adapters.embedded import postings

    monkeypatch.setattr(postings, "_STEMS_KEPT", 12)
    for i in range(4):  # each write brings more new words than the memo keeps
        store.put(_records("t1", "u1", TEXTS[i * 2 : i * 2 + 2], copies=1))
        for query in QUERIES:
            got = {h.id: h.score for h in store.bm25_search("t1", "u1", query, 100, MemoryFilters())}
            assert got == _fts5(store, "t1", "u1", query, fts.MAIN), query


def test_bm25_with_counts_answers_as_the_two_calls_do(store: EmbeddedMemoryStore) -> None:
    # One pass scores and counts (``Bm25WithTermCounts``): the very ranking and counts of the two calls,
    # for a search of every row, an LTM one (another collection), one nothing matches, and a session's.
    store.put(_records("t1", "u1", TEXTS))
    records = _records("t1", "u1", ["tea garden", "tea"], copies=1)
    store.put(records)
    from memstack.domain import versions

    store.supersede(
        "t1",
        "u1",
        records[0].id,
        versions.new_version(records[0], content="tea", embedder=None, coarse_dim=8),
    )
    every = [MemoryFilters(), MemoryFilters(tier=Tier.LTM), MemoryFilters(session_id="s1", session_only=True)]
    for query in [*QUERIES, "", "the"]:
        for filters in every:
            ranking, counts = store.bm25_with_counts("t1", "u1", query, 7, filters)
            want = store.bm25_ranked("t1", "u1", query, 7, filters)
            assert ranking.ids == want.ids and np.array_equal(ranking.scores, want.scores), query
            separately = store.term_counts("t1", "u1", query)
            # the same terms in the same order (the evidence sums over them in it)
            assert (counts.docs, list(counts.df.items())) == (separately.docs, list(separately.df.items()))
    assert store.bm25_with_counts("t1", "nobody", "tea", 7, MemoryFilters())[1].docs == 0
