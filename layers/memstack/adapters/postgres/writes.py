"""The write statements: each one statement, so one transaction even over the Data API.

Besides the rows, every write keeps ``text_stats`` (per user: how many
documents BM25 ranks over and their total length) exact in the same
statement, so a search reads its corpus statistics from one row instead of
counting the user's documents. A document counts while it is current and not
a tombstone.
"""

from __future__ import annotations

from memstack.adapters.postgres.filters import OWNER
from memstack.adapters.postgres.records import INSERT_COLUMNS, INSERT_VALUES, RECORDSET_TYPES, micros_sql

_RECORDSET = f"jsonb_to_recordset(CAST(:records AS jsonb)) AS r({RECORDSET_TYPES})"


def _sources(schema: str) -> str:
    return f"""src AS (
    INSERT INTO {schema}.memory_sources (tenant, user_id, source_id, memory_id)
    SELECT DISTINCT r.tenant, r.user_id, src.value, r.id FROM r, jsonb_array_elements_text(r.source_ids) src
    ON CONFLICT DO NOTHING)"""


def _add_stats(schema: str, deltas: str) -> str:
    """Add ``deltas`` (rows of tenant, user_id, docs, total_len) to the users' statistics."""
    return f"""stats AS (
    INSERT INTO {schema}.text_stats AS t (tenant, user_id, docs, total_len)
    SELECT tenant, user_id, sum(docs), sum(total_len) FROM ({deltas}) d GROUP BY tenant, user_id
    ON CONFLICT (tenant, user_id) DO UPDATE
    SET docs = t.docs + EXCLUDED.docs, total_len = t.total_len + EXCLUDED.total_len)"""


def insert_sql(schema: str) -> str:
    """``:records`` (a JSON array of ``record_document``) inserted with their sources."""
    return f"""
WITH r AS (SELECT * FROM {_RECORDSET}),
ins AS (
    INSERT INTO {schema}.memories ({INSERT_COLUMNS}) SELECT {INSERT_VALUES} FROM r
    RETURNING tenant, user_id, doc_len, is_current AND NOT deleted AS counted),
{_sources(schema)},
{_add_stats(schema, "SELECT tenant, user_id, 1 AS docs, doc_len AS total_len FROM ins WHERE counted")}
SELECT count(*) AS inserted FROM ins"""


def supersede_sql(schema: str) -> str:
    """Retire ``:old_id`` if it is still current and insert ``:records`` (the new version) only then."""
    deltas = """SELECT CAST(:tenant AS text) AS tenant, CAST(:user_id AS text) AS user_id,
               -1 AS docs, -doc_len AS total_len
        FROM old WHERE NOT deleted
        UNION ALL SELECT tenant, user_id, 1, doc_len FROM ins WHERE counted"""
    return f"""
WITH old AS (
    UPDATE {schema}.memories m SET is_current = false, superseded_at = {micros_sql(":superseded_at")}
    WHERE {OWNER} AND m.id = :old_id AND m.is_current
    RETURNING m.id, m.doc_len, m.deleted),
r AS (SELECT * FROM {_RECORDSET} WHERE EXISTS (SELECT 1 FROM old)),
ins AS (
    INSERT INTO {schema}.memories ({INSERT_COLUMNS}) SELECT {INSERT_VALUES} FROM r
    RETURNING tenant, user_id, doc_len, is_current AND NOT deleted AS counted),
{_sources(schema)},
{_add_stats(schema, deltas)}
SELECT (SELECT count(*) FROM old) AS retired, (SELECT count(*) FROM ins) AS inserted"""


def mark_sql(schema: str) -> str:
    """Merge ``:patch`` into the metadata of ``:ids``; only rows where a field differs change."""
    return f"""
UPDATE {schema}.memories m SET metadata = m.metadata || CAST(:patch AS jsonb)
WHERE {OWNER} AND m.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))
  AND (SELECT jsonb_object_agg(key, m.metadata -> key) FROM jsonb_object_keys(CAST(:patch AS jsonb)) key)
      IS DISTINCT FROM CAST(:patch AS jsonb)
RETURNING m.id"""


def erase_sql(schema: str) -> str:
    """Every row of the user: memories, sources and statistics."""
    return f"""
WITH gone AS (DELETE FROM {schema}.memories m WHERE {OWNER} RETURNING 1),
sources AS (DELETE FROM {schema}.memory_sources m WHERE {OWNER}),
stats AS (DELETE FROM {schema}.text_stats m WHERE {OWNER})
SELECT count(*) AS memories FROM gone"""
