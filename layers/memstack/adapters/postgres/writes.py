"""The write statements: each one statement, so one transaction even over the Data API.

Besides the rows, every write keeps ``text_stats`` (per user: how many
documents BM25 ranks over and their total length) exact in the same
statement, so a search reads its corpus statistics from one row instead of
counting the user's documents. A document counts while it is current and not
a tombstone. It also keeps ``postings`` (BM25's inverted index, see
``search``): an inserted document's lexemes go in with it, a superseded
one's are marked not current, an erase removes the user's.

``put`` and ``supersede`` are fenced (``domain/erasure.py``): ``:fence_keys``
names the users of work that declared when it began (``:fence_began``), and
the statement writes nothing, answering ``refused``, when one of them was
erased since (``erased_since``, migration 5). Writes outside declared work
pass an empty list and take no lock.
"""

from __future__ import annotations

from memstack.adapters.postgres.filters import OWNER
from memstack.adapters.postgres.records import INSERT_COLUMNS, INSERT_VALUES, RECORDSET_TYPES, micros_sql

_RECORDSET = f"jsonb_to_recordset(CAST(:records AS jsonb)) AS r({RECORDSET_TYPES})"


def _fence(schema: str) -> str:
    return f"""fence AS MATERIALIZED (
    SELECT {schema}.erased_since(CAST(:fence_keys AS jsonb), CAST(:fence_began AS float8)) AS refused)"""


#: a write's condition that the fence let it through
_ALLOWED = "NOT (SELECT refused FROM fence)"
_REFUSED = "(SELECT refused FROM fence) AS refused"


def _sources(schema: str) -> str:
    return f"""src AS (
    INSERT INTO {schema}.memory_sources (tenant, user_id, source_id, memory_id)
    SELECT DISTINCT r.tenant, r.user_id, src.value, r.id FROM r, jsonb_array_elements_text(r.source_ids) src
    ON CONFLICT DO NOTHING)"""


def _postings(schema: str) -> str:
    """The inserted rows' postings: one per lexeme of each document that is not a tombstone."""
    return f"""post AS (
    INSERT INTO {schema}.postings (tenant, user_id, lexeme, id, tf, doc_len, is_current)
    SELECT ins.tenant, ins.user_id, t.lexeme, ins.id, cardinality(t.positions), ins.doc_len, ins.is_current
    FROM ins, unnest(ins.tsv) t WHERE NOT ins.deleted)"""


#: what ``ins`` returns for the statistics and the postings
_INSERTED = "tenant, user_id, id, tsv, doc_len, deleted, is_current, is_current AND NOT deleted AS counted"


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
WITH {_fence(schema)},
r AS (SELECT * FROM {_RECORDSET} WHERE {_ALLOWED}),
ins AS (
    INSERT INTO {schema}.memories ({INSERT_COLUMNS}) SELECT {INSERT_VALUES} FROM r RETURNING {_INSERTED}),
{_sources(schema)},
{_postings(schema)},
{_add_stats(schema, "SELECT tenant, user_id, 1 AS docs, doc_len AS total_len FROM ins WHERE counted")}
SELECT count(*) AS inserted, {_REFUSED} FROM ins"""


def supersede_sql(schema: str) -> str:
    """Retire ``:old_id`` if it is still current and insert ``:records`` (the new version) only then."""
    deltas = """SELECT CAST(:tenant AS text) AS tenant, CAST(:user_id AS text) AS user_id,
               -1 AS docs, -doc_len AS total_len
        FROM old WHERE NOT deleted
        UNION ALL SELECT tenant, user_id, 1, doc_len FROM ins WHERE counted"""
    return f"""
WITH {_fence(schema)},
old AS (
    UPDATE {schema}.memories m SET is_current = false, superseded_at = {micros_sql(":superseded_at")}
    WHERE {OWNER} AND m.id = :old_id AND m.is_current AND {_ALLOWED}
    RETURNING m.id, m.doc_len, m.deleted, m.tsv),
retired AS (
    UPDATE {schema}.postings p SET is_current = false FROM old
    WHERE p.tenant = :tenant AND p.user_id = :user_id AND p.lexeme = ANY(tsvector_to_array(old.tsv))
      AND p.id = old.id),
r AS (SELECT * FROM {_RECORDSET} WHERE EXISTS (SELECT 1 FROM old)),
ins AS (
    INSERT INTO {schema}.memories ({INSERT_COLUMNS}) SELECT {INSERT_VALUES} FROM r RETURNING {_INSERTED}),
{_sources(schema)},
{_postings(schema)},
{_add_stats(schema, deltas)}
SELECT (SELECT count(*) FROM old) AS retired, (SELECT count(*) FROM ins) AS inserted, {_REFUSED}"""


def mark_sql(schema: str) -> str:
    """Merge ``:patch`` into the metadata of ``:ids``; only rows where a field differs change."""
    return f"""
UPDATE {schema}.memories m SET metadata = m.metadata || CAST(:patch AS jsonb)
WHERE {OWNER} AND m.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))
  AND (SELECT jsonb_object_agg(key, m.metadata -> key) FROM jsonb_object_keys(CAST(:patch AS jsonb)) key)
      IS DISTINCT FROM CAST(:patch AS jsonb)
RETURNING m.id"""


def link_conflicts_sql(schema: str) -> str:
    """Append to each row of ``:links`` the ids its ``conflicts_with`` lacks (changed rows only)."""
    return f"""
UPDATE {schema}.memories m SET conflicts_with = m.conflicts_with || COALESCE((
    SELECT jsonb_agg(DISTINCT other) FROM jsonb_array_elements_text(CAST(:links AS jsonb) -> m.id) other
    WHERE NOT m.conflicts_with @> jsonb_build_array(other)), '[]')
WHERE {OWNER} AND m.id IN (SELECT jsonb_object_keys(CAST(:links AS jsonb)))
  AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(CAST(:links AS jsonb) -> m.id) other
              WHERE NOT m.conflicts_with @> jsonb_build_array(other))
RETURNING m.id"""


def erase_lock_sql(schema: str) -> str:
    """The user's erase lock (exclusive; see ``erased_since``), first statement of the erase."""
    lock = f"hashtextextended('{schema}.' || CAST(:key AS text), 0)"
    return f"SELECT pg_advisory_xact_lock({lock}) IS NULL AS locked"


def erase_sql(schema: str) -> str:
    """The marker first, then every row of the user: memories (every version), sources, statistics, postings.

    Markers past their expiry go in the same statement (the one just written is kept).
    """
    return f"""
WITH marker AS (
    INSERT INTO {schema}.erasures AS e (key, erased_at, expires_at) VALUES (:key, :now, :expires)
    ON CONFLICT (key) DO UPDATE SET erased_at = EXCLUDED.erased_at, expires_at = EXCLUDED.expires_at),
expired AS (DELETE FROM {schema}.erasures e WHERE e.expires_at < :now AND e.key <> :key),
gone AS (DELETE FROM {schema}.memories m WHERE {OWNER} RETURNING 1),
sources AS (DELETE FROM {schema}.memory_sources m WHERE {OWNER}),
stats AS (DELETE FROM {schema}.text_stats m WHERE {OWNER}),
post AS (DELETE FROM {schema}.postings m WHERE {OWNER})
SELECT count(*) AS memories FROM gone"""
