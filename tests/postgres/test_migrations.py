"""Migrations: from an empty database, from each earlier schema with data in it, and atomically."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from memstack.adapters.postgres import schema as pg_schema
from memstack.adapters.postgres import writes
from memstack.adapters.postgres.records import INSERT_COLUMNS, INSERT_VALUES, RECORDSET_TYPES, records_json
from memstack.adapters.postgres.schema import LATEST, Migration, applied_versions, migrate
from memstack.domain.vectors import coarse_prefix
from memstack.errors import SettingsError
from memstack.models import MemoryFilters

from .conftest import COARSE_DIM, EMB, record

# The insert's columns before migration 8 (``conflicts_with``): every earlier schema lacks it.
_OLD_COLUMNS = INSERT_COLUMNS.removesuffix(", conflicts_with")
_OLD_VALUES = INSERT_VALUES.removesuffix(", COALESCE(r.conflicts_with, '[]')")
assert (_OLD_COLUMNS, _OLD_VALUES) != (INSERT_COLUMNS, INSERT_VALUES)


def _insert_before_v4(schema: str) -> str:
    """The insert of the store before migration 4 (no statistics), which names only v1 columns."""
    return f"""
WITH r AS (SELECT * FROM jsonb_to_recordset(CAST(:records AS jsonb)) AS r({RECORDSET_TYPES})),
ins AS (INSERT INTO {schema}.memories ({_OLD_COLUMNS}) SELECT {_OLD_VALUES} FROM r RETURNING id),
src AS (
    INSERT INTO {schema}.memory_sources (tenant, user_id, source_id, memory_id)
    SELECT DISTINCT r.tenant, r.user_id, s.value, r.id FROM r, jsonb_array_elements_text(r.source_ids) s)
SELECT count(*) AS inserted FROM ins"""


def _insert_before_v5(schema: str) -> str:
    """The insert of the store from migration 4 on, before the erase fence (5): it keeps text_stats."""
    return f"""
WITH r AS (SELECT * FROM jsonb_to_recordset(CAST(:records AS jsonb)) AS r({RECORDSET_TYPES})),
ins AS (
    INSERT INTO {schema}.memories ({_OLD_COLUMNS}) SELECT {_OLD_VALUES} FROM r
    RETURNING tenant, user_id, doc_len, is_current AND NOT deleted AS counted),
src AS (
    INSERT INTO {schema}.memory_sources (tenant, user_id, source_id, memory_id)
    SELECT DISTINCT r.tenant, r.user_id, s.value, r.id FROM r, jsonb_array_elements_text(r.source_ids) s),
stats AS (
    INSERT INTO {schema}.text_stats (tenant, user_id, docs, total_len)
    SELECT tenant, user_id, count(*), sum(doc_len) FROM ins WHERE counted GROUP BY tenant, user_id)
SELECT count(*) AS inserted FROM ins"""


def _insert_before_v8(schema: str) -> str:
    """The store's insert from migration 7 on (postings), before contradictions (8)."""
    now = f"({INSERT_COLUMNS}) SELECT {INSERT_VALUES}"
    sql = writes.insert_sql(schema)
    assert now in sql
    return sql.replace(now, f"({_OLD_COLUMNS}) SELECT {_OLD_VALUES}")


def _insert_as_of(version: int, schema: str) -> str:
    if version >= 7:
        return _insert_before_v8(schema)
    return _insert_before_v4(schema) if version < 4 else _insert_before_v5(schema)


def _insert_params(version: int, records: str) -> dict[str, Any]:
    """The insert's parameters: from migration 7 on the store's own insert, with a fence that lets it by."""
    return {"records": records, **({"fence_keys": "[]", "fence_began": 0.0} if version >= 7 else {})}


def _executor(postgres_server: Any) -> Any:
    from memstack.adapters.postgres.psycopg_executor import PsycopgExecutor

    return PsycopgExecutor(postgres_server.dsn, max_size=1)


def test_from_an_empty_database_every_migration_applies_once(
    postgres_server: Any, postgres_schema: str
) -> None:
    executors = [_executor(postgres_server) for _ in range(2)]
    try:
        assert applied_versions(executors[0], postgres_schema) == []
        results: list[list[Migration]] = []
        # Two processes starting at once: the advisory lock makes one wait for the other.
        threads = [
            threading.Thread(target=lambda ex=ex: results.append(migrate(ex, postgres_schema, COARSE_DIM)))
            for ex in executors
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert sorted(len(r) for r in results) == [0, LATEST]
        assert applied_versions(executors[0], postgres_schema) == list(range(1, LATEST + 1))
        assert migrate(executors[0], postgres_schema, COARSE_DIM) == []
    finally:
        for ex in executors:
            ex.close()


@pytest.mark.parametrize("previous", range(1, LATEST))
def test_from_a_previous_schema_the_data_stays_and_becomes_searchable(
    make_store: Any, postgres_server: Any, postgres_schema: str, previous: int
) -> None:
    executor = _executor(postgres_server)
    try:
        migrate(executor, postgres_schema, COARSE_DIM, target=previous)
        assert applied_versions(executor, postgres_schema) == list(range(1, previous + 1))
        # Rows written the way the store wrote them at that version.
        kept = [
            record("the golden retriever is called Biscuit", source_ids=["m1"]),
            record("ramen with extra garlic", source_ids=["m1"]),
        ]
        executor.query(_insert_as_of(previous, postgres_schema), _insert_params(previous, records_json(kept)))
        applied = migrate(executor, postgres_schema, COARSE_DIM)
        assert [m.version for m in applied] == list(range(previous + 1, LATEST + 1))
    finally:
        executor.close()
    store = make_store()
    assert store.get("t1", "u1", kept[0].id) == kept[0].model_copy(
        update={"embedding_full": None, "embedding_coarse": None}
    )
    assert [h.id for h in store.bm25_search("t1", "u1", "retriever", 5, MemoryFilters())] == [kept[0].id]
    query = coarse_prefix(EMB.embed(["ramen with extra garlic"])[0], COARSE_DIM)
    assert store.vector_search("t1", "u1", query, 1, MemoryFilters())[0].id == kept[1].id
    assert [r.id for r in store.find_by_source("t1", "u1", "m1")] == [kept[0].id, kept[1].id]
    # The statistics were counted from the rows already there, and writes keep them exact.
    stats = store.executor.query(f"SELECT docs, total_len FROM {postgres_schema}.text_stats")
    assert stats[0]["docs"] == 2
    store.put([record("a third memory")])
    assert store.executor.query(f"SELECT docs FROM {postgres_schema}.text_stats")[0]["docs"] == 3


def test_a_failing_migration_changes_nothing(
    postgres_server: Any, postgres_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = _executor(postgres_server)
    try:
        migrate(executor, postgres_schema, COARSE_DIM, target=1)
        broken = Migration(LATEST + 1, "broken", ("CREATE TABLE {schema}.half_done (x int)", "SELECT 1/0"))
        monkeypatch.setattr(pg_schema, "MIGRATIONS", (*pg_schema.MIGRATIONS, broken))
        with pytest.raises(Exception, match="division by zero"):
            migrate(executor, postgres_schema, COARSE_DIM, target=LATEST + 1)
        assert applied_versions(executor, postgres_schema) == [1]
        missing = executor.query(
            "SELECT to_regclass(:t) IS NULL AS gone", {"t": f"{postgres_schema}.half_done"}
        )
        assert missing[0]["gone"]
    finally:
        executor.close()


def test_a_different_coarse_dimension_is_refused_at_start(postgres_server: Any, postgres_schema: str) -> None:
    from memstack.adapters.postgres.store import PostgresMemoryStore

    executor = _executor(postgres_server)
    try:
        migrate(executor, postgres_schema, COARSE_DIM)
        with pytest.raises(SettingsError, match=f"MEMSTACK_COARSE_DIM is 32 but .* holds {COARSE_DIM}-dim"):
            PostgresMemoryStore(executor, schema=postgres_schema, coarse_dim=32)
    finally:
        executor.close()
