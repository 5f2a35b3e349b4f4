"""``memstack bench search --backend postgres`` on a tiny store, against the same floor as embedded."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import psycopg
import pytest
from memstack.bench.fixture import TENANT, BenchStore, user_name
from memstack.bench.floor import Floor
from memstack.cli import app
from typer.testing import CliRunner


def test_bench_search_runs_on_postgres_and_leaves_nothing_behind(
    postgres_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSTACK_POSTGRES_DSN", postgres_server.dsn)
    args = ["bench", "search", "--backend", "postgres", "--memories", "40", "--users", "2", "--queries", "3"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["config"]["backend"] == "postgres"
    (point,) = report["points"]
    assert point["memories"] == 40 and point["floor_ms"]["p50"] > 0 and point["ratio_p50"] > 0
    assert {"vector", "bm25", "fusion"} <= set(point["stages_p50_ms"])
    # Beside the in-process floor: the store's own two statements in their least form on the server.
    assert point["server_floor_ms"]["p50"] > 0 and point["server_ratio_p50"] > 0
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench_%'").fetchone()
    assert left == (0,)


def test_the_floor_read_through_the_port_is_the_floor_of_the_file(tmp_path: Any) -> None:
    with BenchStore("hashing", data_dir=tmp_path, store_backend="embedded") as store:
        store.grow(0, 25)
        by_file = Floor.of_user(store.settings.db_path, TENANT, user_name(0))
        by_port = Floor.of_store(
            store.service.store, TENANT, user_name(0), store.settings.embedding.coarse_dim
        )
    try:
        assert by_port.matrix.shape == by_file.matrix.shape
        order = np.lexsort(by_file.matrix.T)
        np.testing.assert_allclose(
            by_port.matrix[np.lexsort(by_port.matrix.T)], by_file.matrix[order], atol=1e-6
        )
        assert by_port.match_fraction("what did I say") == by_file.match_fraction("what did I say")
    finally:
        by_file.close()
        by_port.close()


def test_the_server_floor_ranks_every_row_exactly_and_matches_every_row_with_a_query_word(
    make_store: Any,
) -> None:
    from memstack.bench.server_floor import ServerFloor

    from .conftest import COARSE_DIM, EMB, record

    store = make_store()
    texts = [f"note {i} about {'tea' if i % 3 == 0 else 'coffee'} number {i * 7 % 11}" for i in range(60)]
    records = [record(t) for t in texts]
    store.put([*records, record("tea for someone else", user="u2")])
    floor = ServerFloor(store, "t1", "u1", k=10)
    query = "tea please"
    query_vec = EMB.embed([query])[0]
    nearest, matched = floor.answers(query_vec, query)
    coarse = np.array([r.embedding_coarse for r in records], dtype=np.float32)
    q = query_vec[:COARSE_DIM] / np.linalg.norm(query_vec[:COARSE_DIM])
    cosine = coarse @ q / np.linalg.norm(coarse, axis=1)
    by_id = {r.id: c for r, c in zip(records, cosine.tolist(), strict=True)}
    # The 10 best cosines of all the user's rows (ties may come in any order), best first.
    np.testing.assert_allclose([by_id[i] for i in nearest], np.sort(cosine)[::-1][:10], atol=1e-5)
    assert sorted(matched) == sorted(r.id for r in records if "tea" in r.content)
    assert floor.search(query_vec, query) > 0
