"""BM25's corpus statistics (``text_stats``) stay equal to a recount through every kind of write."""

from __future__ import annotations

from typing import Any

from memstack.domain import versions
from memstack.models import Tier

from .conftest import COARSE_DIM, EMB, record


def _stats(store: Any, user: str) -> tuple[int, int]:
    rows = store.executor.query(
        f"SELECT docs, total_len FROM {store.schema}.text_stats WHERE tenant = 't1' AND user_id = :u",
        {"u": user},
    )
    return (int(rows[0]["docs"]), int(rows[0]["total_len"])) if rows else (0, 0)


def _recount(store: Any, user: str) -> tuple[int, int]:
    (row,) = store.executor.query(
        f"""SELECT count(*) AS docs, coalesce(sum(doc_len), 0) AS total_len FROM {store.schema}.memories
            WHERE tenant = 't1' AND user_id = :u AND is_current AND NOT deleted""",
        {"u": user},
    )
    return int(row["docs"]), int(row["total_len"])


def test_statistics_follow_puts_versions_tombstones_and_erase(make_store: Any) -> None:
    store = make_store()
    a, b = record("I live in Berlin with two cats"), record("raw turn", tier=Tier.STM)
    store.put([a, b, record("someone else entirely", user="u2")])
    assert _stats(store, "u1") == _recount(store, "u1") and _stats(store, "u1")[0] == 2
    newer = versions.new_version(a, content="I live in Lisbon now", embedder=EMB, coarse_dim=COARSE_DIM)
    store.supersede("t1", "u1", a.id, newer)
    assert _stats(store, "u1") == _recount(store, "u1")
    tomb = versions.new_version(newer, content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True)
    store.supersede("t1", "u1", newer.id, tomb)
    assert _stats(store, "u1") == _recount(store, "u1") and _stats(store, "u1")[0] == 1
    store.mark("t1", "u1", [b.id], consolidated=True)
    assert _stats(store, "u1") == _recount(store, "u1")
    store.erase_user("t1", "u1")
    assert _stats(store, "u1") == (0, 0)
    assert _stats(store, "u2") == _recount(store, "u2") == (1, 3)
