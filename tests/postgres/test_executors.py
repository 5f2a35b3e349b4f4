"""The ``SqlExecutor`` contract, run on both implementations against the real database.

``psycopg`` connects directly; ``data-api`` goes through ``DataApiExecutor``
and an ``rds-data`` client that answers from the same database
(tests/data_api_emulator.py). The wire format of the Data API itself is
checked with botocore's Stubber in test_data_api_executor.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from memstack.adapters.postgres.data_api_executor import DataApiExecutor
from memstack.adapters.postgres.executor import DuplicateKey, vector_from_binary, vector_text
from memstack.adapters.postgres.psycopg_executor import PsycopgExecutor

from tests.conformance.conftest import SECRET_ARN
from tests.data_api_emulator import DataApiEmulator

CLUSTER_ARN = "arn:aws:rds:us-east-1:123456789012:cluster:memstack"


@pytest.fixture(params=["psycopg", "data-api"])
def executor(request: pytest.FixtureRequest, postgres_server: Any, postgres_schema: str) -> Iterator[Any]:
    if request.param == "psycopg":
        ex: Any = PsycopgExecutor(postgres_server.dsn, max_size=2)
        emulator = None
    else:
        emulator = DataApiEmulator(postgres_server.dsn)
        ex = DataApiExecutor(CLUSTER_ARN, SECRET_ARN, "postgres", client=emulator)
    ex.query("CREATE EXTENSION IF NOT EXISTS vector")  # what migration 1 does; no test may rely on order
    ex.query(f"CREATE SCHEMA {postgres_schema}")
    ex.query(f"CREATE TABLE {postgres_schema}.t (k text PRIMARY KEY, n bigint)")
    ex.schema = postgres_schema  # type: ignore[attr-defined]
    yield ex
    ex.close()
    if emulator is not None:
        emulator.close()


def test_portable_values_round_trip(executor: Any) -> None:
    rows = executor.query(
        "SELECT :s AS s, :i AS i, :f AS f, :b AS b, CAST(:n AS text) AS n, decode(:hex, 'hex') AS blob, "
        "vector_send(CAST(:v AS vector)) AS v, 'it''s 100%' AS literal, 2::int8 * 3 AS cast_ok",
        {
            "s": "naïve 'quoted'",
            "i": 2**40,
            "f": 0.25,
            "b": True,
            "n": None,
            "hex": "00ff",
            "v": vector_text([0.1, -2.5, 3.0]),
        },
    )
    (row,) = rows
    assert (row["s"], row["i"], row["f"], row["b"], row["n"]) == ("naïve 'quoted'", 2**40, 0.25, True, None)
    assert bytes(row["blob"]) == b"\x00\xff"
    assert vector_from_binary(row["v"]).tolist() == pytest.approx([0.1, -2.5, 3.0], rel=1e-7)
    assert (row["literal"], row["cast_ok"]) == ("it's 100%", 6)
    assert executor.query(f"SELECT k FROM {executor.schema}.t") == []


def test_a_transaction_commits_together_or_not_at_all(executor: Any) -> None:
    t = f"{executor.schema}.t"
    with executor.transaction() as tx:
        tx.query(f"INSERT INTO {t} (k, n) VALUES (:k, :n)", {"k": "a", "n": 1})
        tx.query(f"INSERT INTO {t} (k, n) VALUES (:k, :n)", {"k": "b", "n": 2})
    with pytest.raises(RuntimeError), executor.transaction() as tx:
        tx.query(f"INSERT INTO {t} (k, n) VALUES (:k, :n)", {"k": "c", "n": 3})
        raise RuntimeError("the caller changed its mind")
    assert [r["k"] for r in executor.query(f"SELECT k FROM {t} ORDER BY k")] == ["a", "b"]


def test_a_unique_violation_is_duplicate_key_and_changes_nothing(executor: Any) -> None:
    t = f"{executor.schema}.t"
    executor.query(f"INSERT INTO {t} (k, n) VALUES (:k, :n)", {"k": "a", "n": 1})
    with pytest.raises(DuplicateKey):
        executor.query(f"INSERT INTO {t} (k, n) VALUES ('b', 2), (:k, :n)", {"k": "a", "n": 9})
    assert executor.query(f"SELECT k, n FROM {t} ORDER BY k") == [{"k": "a", "n": 1}]


def test_data_api_limits_split_writes_in_one_transaction_and_reads_in_chunks(
    postgres_server: Any, postgres_schema: str
) -> None:
    from memstack.adapters.postgres.store import PostgresMemoryStore
    from memstack.errors import Conflict

    from .conftest import COARSE_DIM, record

    emulator = DataApiEmulator(postgres_server.dsn)
    executor = DataApiExecutor(CLUSTER_ARN, SECRET_ARN, "postgres", client=emulator)
    # Tiny limits so that 30 records need several statements each way.
    executor.max_request_bytes = 6_000
    executor.max_result_bytes = 2_000
    store = PostgresMemoryStore(executor, schema=postgres_schema, coarse_dim=COARSE_DIM, embedding_dim=64)
    try:
        records = [record(f"memory number {i}") for i in range(30)]
        emulator.calls.clear()
        store.put(records)
        assert emulator.calls[0] == "BeginTransaction" and emulator.calls[-1] == "CommitTransaction"
        assert emulator.calls.count("ExecuteStatement") > 3
        ids = [r.id for r in records]
        emulator.calls.clear()
        vectors = store.embeddings("t1", "u1", ids)
        assert set(vectors) == set(ids) and emulator.calls.count("ExecuteStatement") > 3
        # A duplicate in a later batch undoes the earlier batches too.
        fresh = [record(f"fresh memory {i}") for i in range(20)]
        with pytest.raises(Conflict):
            store.put([*fresh, records[0]])
        assert store.get_many("t1", "u1", [r.id for r in fresh]) == {}
    finally:
        store.close()
        emulator.close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "needs MEMSTACK_POSTGRES_DSN"),
        (
            {"postgres_executor": "data-api"},
            "needs MEMSTACK_POSTGRES_CLUSTER_ARN and MEMSTACK_POSTGRES_SECRET_ARN",
        ),
    ],
)
def test_a_postgres_store_without_its_connection_settings_is_refused_by_name(
    tmp_path: Any, settings: dict[str, str], message: str
) -> None:
    from memstack.errors import SettingsError
    from memstack.factory import build_service
    from memstack.settings import load_settings

    with pytest.raises(SettingsError, match=message):
        build_service(
            load_settings(data_dir=tmp_path, embedder="hashing", store_backend="postgres", **settings)
        )
