"""The embedded store's search hot path: exact against brute force, isolated, current after any write.

The reference answers are computed the slow, obviously right way, straight
from SQL on the same file: every row of the user with ``filter_sql``'s
conditions for the vectors, and for BM25 FTS5's own ``bm25()`` over the
user's rows alone in a table, filtered in SQL.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memstack.adapters.embedded import fts
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.rows import filter_sql
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.domain import metadata_filter, versions
from memstack.models import Category, Kind, MemoryFilters, MemoryRecord, Scope, ScoredId, Tier
from memstack.ports.store import Candidates, Derived, pinned

from ..strategies import memory_filters, metadata_of
from .fts5_reference import fts5_scores

DIM = 8
T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = ["tea", "coffee", "garden", "piano", "hiking", "ramen", "puppy", "nurse", "lisbon", "osaka", "jazz"]
USERS = [("t1", "u1"), ("t1", "u2"), ("t2", "u1")]


def _vector(rng: np.random.Generator) -> list[float]:
    v = rng.normal(size=DIM).astype(np.float32)
    return (v / np.linalg.norm(v)).tolist()


def _record(rng: np.random.Generator, tenant: str, user: str, i: int) -> MemoryRecord:
    vec = _vector(rng)
    scope = Scope.CONTEXT if rng.random() < 0.3 else Scope.USER
    return MemoryRecord(
        tenant=tenant,
        user_id=user,
        content=" ".join(rng.choice(WORDS, size=int(rng.integers(1, 6)))),
        scope=scope,
        session_id=str(rng.choice(["s1", "s2"])) if rng.random() < 0.7 else None,
        tier=Tier.STM if rng.random() < 0.5 else Tier.LTM,
        kind=list(Kind)[int(rng.integers(0, 3))],
        category=[None, Category.TRAVEL, Category.HEALTH][int(rng.integers(0, 3))],
        created_at=T0 + timedelta(days=i),
        event_time=T0 + timedelta(days=int(rng.integers(0, 40))) if rng.random() < 0.5 else None,
        source_ids=[f"m{int(x)}" for x in rng.integers(0, 12, size=int(rng.integers(0, 4)))],
        metadata=_metadata(rng),
        embedding_full=vec,
        embedding_coarse=vec,
    )


def _metadata(rng: np.random.Generator) -> dict[str, object]:
    """Filterable keys, and sometimes the consolidated flag (any JSON value: its truth counts)."""
    out: dict[str, object] = metadata_of(rng)
    if rng.random() < 0.4:
        out["consolidated"] = [True, False, 1, "", [], {"a": 1}][int(rng.integers(0, 6))]
    return out


def _no_metadata(f: MemoryFilters) -> MemoryFilters:
    """The filters in SQL; metadata is checked in Python, from each row's stored JSON."""
    return f.model_copy(update={"metadata": None})


def _brute_vector(
    db: Database, tenant: str, user: str, q: np.ndarray, k: int, f: MemoryFilters, column: str = "emb_coarse"
) -> list[Any]:
    where, params = filter_sql(_no_metadata(f), search=True)
    rows = db.read().execute(
        f"SELECT m.id, m.{column}, m.metadata FROM memories m WHERE m.tenant = ? AND m.user_id = ?{where}",
        (tenant, user, *params),
    )
    scored = [
        (row[0], float(np.frombuffer(row[1], dtype=np.float32) @ q))
        for row in rows
        if metadata_filter.matches(json.loads(row[2]), f.metadata)
    ]
    return sorted(scored, key=lambda s: -s[1])[:k]


def _brute_bm25(db: Database, tenant: str, user: str, query: str, k: int, f: MemoryFilters) -> list[Any]:
    """FTS5's own ``bm25()`` with the user's rows alone in a table: BM25's collection is the user's."""
    conn = db.read()
    # A search of LTM only ranks among LTM rows (``fts.table_for``).
    scores = fts5_scores(conn, tenant, user, query, ltm=f.tier == Tier.LTM)
    if not scores:
        return []
    where, params = filter_sql(_no_metadata(f), search=True)
    rows = conn.execute(
        f"SELECT m.rid, m.id, m.metadata FROM memories m WHERE m.tenant = ? AND m.user_id = ?{where}",
        (tenant, user, *params),
    )
    kept = [
        (row[1], scores[row[0]])
        for row in rows
        if row[0] in scores and metadata_filter.matches(json.loads(row[2]), f.metadata)
    ]
    return sorted(kept, key=lambda s: -s[1])[:k]


def assert_same_candidates(store: EmbeddedMemoryStore, tenant: str, user: str) -> None:
    """The pool's columns and the turns' memories as the index answers them = as the records say."""
    view = store.index(tenant, user)
    others = [r.id for r in store.list("t1", "u2", MemoryFilters(), 3)[0]]
    ids = [*view.ids[: view.size], "missing", *others]
    got = store.candidates(tenant, user, ids)
    records = store.get_many(tenant, user, view.ids[: view.size])
    want = Candidates.from_records(ids, records, store.embeddings(tenant, user, list(records)))
    assert got.ids == want.ids
    for name in ("stm", "current", "deleted", "when", "consolidated", "n_sources", "has_vector", "vectors"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert got.last_source == want.last_source
    assert got.replaced_ltm == any(r.tier == Tier.LTM and not r.is_current for r in records.values())
    # The index rows a ranking gave with its ids (``Ranked.rows``) read the same columns; rows that
    # are not those ids' (another order, a copy of the ids, one past the view) are looked up by id.
    held = view.ids[: view.size]
    by_id = store.candidates(tenant, user, held)
    rows = np.arange(view.size)
    for hint, listed in [
        (rows, held),
        (rows[::-1], held),
        (rows, [(i + "x")[:-1] for i in held]),
        (rows + 1, held),
    ]:
        by_row = store.candidates(tenant, user, list(listed), hint.copy())
        assert by_row.ids == by_id.ids
        for name in ("stm", "current", "when", "n_sources", "vectors"):
            np.testing.assert_array_equal(getattr(by_row, name), getattr(by_id, name), err_msg=name)
        assert by_row.last_source == by_id.last_source
    found, matrix = store.full_vectors(tenant, user, ids)
    assert found == [i for i, has in zip(want.ids, want.has_vector, strict=True) if has]
    np.testing.assert_array_equal(matrix, want.vectors[want.has_vector])
    sources = [f"m{i}" for i in range(12)] + ["nobody"]
    assert store.derived(tenant, user, sources) == {
        s: [
            Derived(r.id, r.replaces_id, r.is_current)
            for r in store.find_by_source(tenant, user, s)
            if r.tier == Tier.LTM and s in r.source_ids
        ]
        for s in sources
    }


def assert_same_top_k(got: list[ScoredId], expected: list[tuple[str, float]]) -> None:
    """Same scores in the same order; the same ids wherever a score is not tied with the cut-off."""
    assert len(got) == len(expected)
    np.testing.assert_allclose([h.score for h in got], [s for _, s in expected], atol=1e-5)
    if expected:
        cut = expected[-1][1]
        assert {h.id for h in got if abs(h.score - cut) > 1e-5} == {
            i for i, s in expected if abs(s - cut) > 1e-5
        }


filters_strategy = memory_filters(T0, 40)
operations = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "put", "update", "delete", "erase", "mark"]),
        st.sampled_from(USERS),
        st.booleans(),  # through a second store on the same file (another process)
    ),
    min_size=1,
    max_size=25,
)


def _apply(
    store: EmbeddedMemoryStore, op: str, tenant: str, user: str, rng: np.random.Generator, step: int
) -> None:
    current = store.list(tenant, user, MemoryFilters(), 500)[0]
    if op == "put" or not current:
        store.put([_record(rng, tenant, user, step * 10 + j) for j in range(int(rng.integers(1, 8)))])
    elif op == "erase":
        store.erase_user(tenant, user)
    elif op == "mark":
        # Both a new key and a changed value of a key filters ask about.
        store.mark(tenant, user, [current[0].id], consolidated=True, n=str(rng.choice(["food", "1"])))
    else:
        old = current[int(rng.integers(0, len(current)))]
        text = " ".join(rng.choice(WORDS, size=3))
        vec = _vector(rng)
        new = versions.new_version(
            old.model_copy(update={"embedding_full": vec, "embedding_coarse": vec}),
            content=None if op == "delete" else text,
            embedder=None,
            coarse_dim=DIM,
            deleted=op == "delete",
        )
        if op != "delete":
            new = new.model_copy(update={"embedding_full": vec, "embedding_coarse": vec})
        store.supersede(tenant, user, old.id, new)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=operations, searches=st.lists(st.tuples(filters_strategy, st.integers(1, 15)), min_size=1, max_size=4)
)
def test_searches_equal_brute_force_after_any_writes_from_any_process(
    ops: list[tuple[str, tuple[str, str], bool]], searches: list[tuple[MemoryFilters, int]]
) -> None:
    rng = np.random.default_rng(len(ops))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.sqlite3"
        reader, writer = EmbeddedMemoryStore(Database(path)), EmbeddedMemoryStore(Database(path))
        try:
            for step, (op, (tenant, user), elsewhere) in enumerate(ops):
                _apply(writer if elsewhere else reader, op, tenant, user, rng, step)
                for t, u in USERS:
                    assert_same_candidates(reader, t, u)
                    view, every = (
                        pinned(reader, t, u),
                        reader.list(t, u, MemoryFilters(include_superseded=True), 500)[0],
                    )
                    assert [view.successor(t, u, r.id) for r in every] == [
                        reader.successor(t, u, r.id) for r in every
                    ]
                for (f, k), (t, u) in itertools.product(searches, USERS):
                    q = np.asarray(_vector(rng), dtype=np.float32)
                    query = " ".join(rng.choice(WORDS, size=2))
                    for view in (reader, pinned(reader, t, u)):
                        assert_same_top_k(
                            view.vector_search(t, u, q, k, f), _brute_vector(reader.db, t, u, q, k, f)
                        )
                        assert_same_top_k(
                            view.bm25_search(t, u, query, k, f), _brute_bm25(reader.db, t, u, query, k, f)
                        )
                        exact = view.exact_vector_search(t, u, q, k, f, below=1_000_000)
                        assert exact is not None
                        assert_same_top_k(list(exact), _brute_vector(reader.db, t, u, q, k, f, "emb_full"))
        finally:
            reader.close()
            writer.close()


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = EmbeddedMemoryStore(Database(tmp_path / "m.sqlite3"))
    yield s
    s.close()


def _plan(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> str:
    return " | ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))


def _simulate_a_user_with_100k_memories(conn: sqlite3.Connection) -> None:
    """Planner statistics of one user holding 100,000 memories (as ``ANALYZE`` would leave them)."""
    conn.execute("ANALYZE")
    conn.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'memories'")
    conn.executemany(
        "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('memories', ?, ?)",
        [
            ("memories_user", "100000 100000 100000 50000 1"),
            ("memories_replaces", "100000 100000 100000 1"),
            ("memories_changes", "100000 100000 100000 1"),
            ("sqlite_autoindex_memories_1", "100000 1"),
        ],
    )
    conn.execute("ANALYZE sqlite_master")  # load them


@pytest.mark.parametrize("statistics", [False, True], ids=["no-statistics", "100k-statistics"])
def test_lookups_by_id_use_the_id_index_not_every_row_of_the_user(
    store: EmbeddedMemoryStore, statistics: bool
) -> None:
    rng = np.random.default_rng(1)
    store.put([_record(rng, "t1", "u1", i) for i in range(300)])
    conn = store.db.read()
    if statistics:
        _simulate_a_user_with_100k_memories(conn)
    ids = [r.id for r in store.list("t1", "u1", MemoryFilters(), 200)[0]]
    marks = ", ".join(f"'{i}'" for i in ids)
    old_form = f"SELECT id FROM memories WHERE tenant = 't1' AND user_id = 'u1' AND id IN ({marks})"
    if not statistics:  # what the issue measured: a fresh file picks the per-user index
        assert "USING INDEX sqlite_autoindex_memories_1" not in _plan(conn, old_form, ())
    traced: list[str] = []
    conn.set_trace_callback(traced.append)
    store.get_many("t1", "u1", ids)
    store._stored_embeddings("t1", "u1", ids)  # vectors of rows the index does not hold (tombstones)
    store.get("t1", "u1", ids[0])
    store.mark("t1", "u1", ids[:5], seen=True)
    conn.set_trace_callback(None)
    selects = [sql for sql in traced if sql.startswith("SELECT") and (" id IN (" in sql or " id = " in sql)]
    assert len(selects) == 4
    for sql in selects:
        plan = _plan(conn, sql, ())
        assert plan == "SEARCH memories USING INDEX sqlite_autoindex_memories_1 (id=?)", plan


def test_no_text_can_spell_another_users_tokens(store: EmbeddedMemoryStore) -> None:
    victim = MemoryRecord(tenant="t1", user_id="victim", content="the secret is marzipan")
    store.put([victim])
    prefix = fts.owner_prefix(1)
    attacker = MemoryRecord(tenant="t1", user_id="attacker", content=f"{prefix}marzipan {prefix} marzipan")
    store.put([attacker])
    assert [h.id for h in store.bm25_search("t1", "attacker", "marzipan", 10, MemoryFilters())] == [
        attacker.id
    ]
    assert [h.id for h in store.bm25_search("t1", "victim", "marzipan", 10, MemoryFilters())] == [victim.id]
    assert store.bm25_search("t1", "victim", f"{fts.owner_prefix(2)}marzipan", 10, MemoryFilters()) == []
    prefixes = {fts.owner_prefix(uid) for uid in range(1, 5000)}
    assert len(prefixes) == 4999 and {len(p) for p in prefixes} == {fts.PREFIX_WIDTH}


def test_a_new_user_after_an_erase_never_reuses_the_old_index(store: EmbeddedMemoryStore) -> None:
    rng = np.random.default_rng(3)
    store.put([_record(rng, "t1", "u1", 0)])
    first = store.index("t1", "u1").uid
    store.erase_user("t1", "u1")
    assert store.index("t1", "u1").size == 0
    again = _record(rng, "t1", "u1", 1)
    store.put([again])
    view = store.index("t1", "u1")
    assert view.uid != first and view.ids[: view.size] == [again.id]


def test_a_write_costs_the_next_search_only_the_rows_it_changed(store: EmbeddedMemoryStore) -> None:
    rng = np.random.default_rng(4)
    store.put([_record(rng, "t1", "u1", i) for i in range(200)])
    before = store.index("t1", "u1")
    conn = store.db.read()
    traced: list[str] = []
    conn.set_trace_callback(traced.append)
    store.put([_record(rng, "t1", "u1", 300)])
    after = store.index("t1", "u1")
    conn.set_trace_callback(None)
    assert after.size == before.size + 1 and after.generation > before.generation
    reads = [sql for sql in traced if "FROM memories WHERE" in sql]
    assert reads and all("row_gen >" in sql for sql in reads)  # the delta, never the whole user
    assert store.embeddings("t1", "u1", after.ids[-1:])  # the new row's full vector came with it
    assert before.size == 200 and before.ids[: before.size] == after.ids[:200]  # the old view is unchanged


def test_views_handed_out_keep_their_generation(store: EmbeddedMemoryStore) -> None:
    rng = np.random.default_rng(5)
    first = _record(rng, "t1", "u1", 0).model_copy(update={"scope": Scope.USER})
    store.put([first])
    old = store.index("t1", "u1")
    new = versions.new_version(first, content="replaced", embedder=None, coarse_dim=DIM)
    store.supersede("t1", "u1", first.id, new.model_copy(update={"embedding_coarse": first.embedding_coarse}))
    current = store.index("t1", "u1")
    assert old.columns.current.tolist() == [True]
    assert current.columns.current.tolist() == [False, True]


def test_concurrent_searches_during_writes_see_only_their_users_rows(store: EmbeddedMemoryStore) -> None:
    import threading

    rng = np.random.default_rng(6)
    store.put(
        [_record(rng, "t1", "u1", i) for i in range(100)] + [_record(rng, "t1", "u2", i) for i in range(100)]
    )
    owned = {u: {r.id for r in store.list("t1", u, MemoryFilters(), 500)[0]} for u in ("u1", "u2")}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer() -> None:
        wrng = np.random.default_rng(7)
        try:
            for step in range(40):
                user = ("u1", "u2")[step % 2]
                fresh = [_record(wrng, "t1", user, 200 + step)]
                with lock:  # known before any search can return it
                    owned[user].update(r.id for r in fresh)
                store.put(fresh)
        except BaseException as exc:
            errors.append(exc)

    def searcher(user: str) -> None:
        srng = np.random.default_rng(hash(user) % 1000)
        try:
            for _ in range(40):
                q = np.asarray(_vector(srng), dtype=np.float32)
                hits = store.vector_search("t1", user, q, 20, MemoryFilters(include_superseded=True))
                hits += store.bm25_search("t1", user, "tea garden puppy", 20, MemoryFilters(session_id="s1"))
                with lock:
                    assert {h.id for h in hits} <= owned[user]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=searcher, args=(u,)) for u in ("u1", "u2", "u1", "u2")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


@pytest.mark.parametrize(
    "filters",
    [
        MemoryFilters(tier=Tier.LTM),
        MemoryFilters(tier=Tier.LTM, session_id="s1"),
        MemoryFilters(kind=Kind.EVENT, category=Category.TRAVEL),
        MemoryFilters(scope=Scope.CONTEXT, session_id="s2"),
    ],
    ids=["ltm", "ltm-in-session", "kind-and-category", "context-of-a-session"],
)
def test_a_filtered_bm25_search_reads_no_sql_and_stays_exact(
    store: EmbeddedMemoryStore, filters: MemoryFilters
) -> None:
    rng = np.random.default_rng(8)
    many = [_record(rng, "t1", "u1", i).model_copy(update={"tier": Tier.STM}) for i in range(300)]
    few = [
        _record(rng, "t1", "u1", 400 + i).model_copy(
            update={"tier": Tier.LTM, "kind": Kind.EVENT, "category": Category.TRAVEL}
        )
        for i in range(12)
    ]
    store.put(many + few + [_record(rng, "t1", "u2", i) for i in range(50)])
    conn = store.db.read()
    traced: list[str] = []
    conn.set_trace_callback(traced.append)
    got = store.bm25_search("t1", "u1", "tea garden puppy jazz", 8, filters)
    conn.set_trace_callback(None)
    assert not any("MATCH" in sql for sql in traced)  # the postings beside the index, not FTS5
    if filters.tier == Tier.LTM:  # LTM rows have postings of their own: no raw turn is read
        ltm = store.index("t1", "u1").text.ltm.terms.values()
        assert {int(r) for p in ltm for r in p.rows} == set(range(300, 312))
    assert_same_top_k(got, _brute_bm25(store.db, "t1", "u1", "tea garden puppy jazz", 8, filters))


def test_full_vector_ranking_is_exact_and_only_below_its_size(store: EmbeddedMemoryStore) -> None:
    """``ExactVectors``: the full-vector top-k = brute force over the rows' full vectors."""
    rng = np.random.default_rng(21)
    records = []
    for i in range(120):
        r = _record(rng, "t1", "u1", i)
        full = _vector(rng)  # the coarse vector says something else: only the full one may rank
        records.append(r.model_copy(update={"embedding_full": full}))
    store.put(records + [_record(rng, "t1", "u2", i) for i in range(20)])
    q = np.asarray(_vector(rng), dtype=np.float32)
    for f in (MemoryFilters(), MemoryFilters(tier=Tier.LTM, session_id="s1")):
        got = store.exact_vector_search("t1", "u1", q, 7, f, below=1000)
        assert got is not None
        assert_same_top_k(got, _brute_vector(store.db, "t1", "u1", q, 7, f, column="emb_full"))
    assert store.exact_vector_search("t1", "u1", q, 7, MemoryFilters(), below=120) is None


def test_exact_ranking_stays_exact_while_the_index_grows_in_place(store: EmbeddedMemoryStore) -> None:
    """The full vectors' second layout (one dimension per row) follows every append and every growth."""
    rng = np.random.default_rng(22)
    for step in range(30):  # past the index's first capacity (64 rows) and its doubling, one refresh each
        store.put([_record(rng, "t1", "u1", step * 10 + j) for j in range(int(rng.integers(1, 9)))])
        q = np.asarray(_vector(rng), dtype=np.float32)
        for f in (MemoryFilters(), MemoryFilters(scope=Scope.USER)):
            got = store.exact_vector_search("t1", "u1", q, 12, f, below=1_000_000)
            assert got is not None
            assert_same_top_k(list(got), _brute_vector(store.db, "t1", "u1", q, 12, f, column="emb_full"))
    assert store.index("t1", "u1").size > 128
