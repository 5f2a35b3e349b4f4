"""The two candidate searches as SQL: BM25 over the full-text index, and the coarse vector pass.

**BM25.** PostgreSQL's own ``ts_rank`` has no inverse document frequency, and
fusion depends on the keyword ranking being as good as the embedded store's,
so the statement computes Okapi BM25 the way SQLite's FTS5 does
(``k1`` = 1.2, ``b`` = 0.75, ``idf = ln((N - df + 0.5) / (df + 0.5))``, at
least 1e-6), exactly, over the user's whole corpus. It reads ``postings``
(migration 7: one row per searchable document and lexeme, with the term's
frequency and the document's length, kept by every write) by index-only
range scans, one per query lexeme, instead of every matching document's
tsvector: a term's document frequency is the number of its postings, each
document's score the sum over its postings; ``N`` and the mean length are
the user's row of ``text_stats``. Only then are the best documents checked
against the filters, by primary key, until ``k`` pass (the filters narrow
the result, never the statistics, as in FTS5). User text never reaches a
query parser: it is tokenised by ``to_tsvector`` (which accepts any text)
and compared as lexemes.

**Vectors.** The HNSW index on the coarse prefix gives the nearest ``k``
under the filters, with pgvector 0.8's iterative scan (``relaxed_order``, set
for the role by migration 3) so a filter that removes most rows still yields
``k``; the rows are re-sorted by exact distance. Two cases scan the user's
rows exactly instead, in the same statement: a user with fewer rows than
``exact_below`` (an exact scan is then cheaper than the graph), and an index
scan that came back short (its ``hnsw.max_scan_tuples`` budget ran out before
``k`` rows passed the filter). So a filtered search returns ``k`` results
whenever ``k`` rows match. Given the full query vector, the same statement
then ranks those ``k`` by their full vectors (``RescoredCandidates``): only
ids and scores leave the server.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memstack.adapters.postgres.executor import vector_text
from memstack.adapters.postgres.filters import OWNER, filter_sql
from memstack.domain.text import query_terms
from memstack.models import MemoryFilters

#: FTS5's Okapi constants (``memstack.domain.bm25`` uses the same)
K1 = 1.2
B = 0.75
#: FTS5's idf (never below 1e-6) and the length normalisation, over the CTEs below
IDF = "greatest(ln((stats.n - df.df + 0.5) / (df.df + 0.5)), 1e-6)"
LENGTH_NORM = f"{K1}::float8 * (1 - {B}::float8 + {B}::float8 * tf.doc_len / greatest(stats.avgdl, 1e-9))"


def query_lexemes(schema: str) -> str:
    """The query's stemmed lexemes (``:terms``, plain words) as a ``text[]`` expression."""
    return f"tsvector_to_array(to_tsvector('{schema}.memstack_english'::regconfig, :terms))"


def lexeme_query(schema: str) -> str:
    """A scalar subquery: the ``tsquery`` matching any of the query's lexemes (each quoted, never parsed)."""
    return f"SELECT string_agg(quote_literal(l), ' | ')::tsquery FROM unnest({query_lexemes(schema)}) l"


def _bm25_ctes(schema: str, filters: MemoryFilters) -> str:
    """``stats``, ``tf`` (the query lexemes' postings), ``df`` and ``scored`` (every matching document)."""
    # The corpus is the user's searchable text (what FTS5 keeps indexed): current versions,
    # or every version when the filters ask for history. ``postings`` holds no tombstone.
    corpus = "" if filters.include_superseded else " AND p.is_current"
    return f"""stats AS MATERIALIZED (
    SELECT coalesce(max(m.docs), 0)::float8 AS n,
           coalesce(max(m.total_len)::float8 / nullif(max(m.docs), 0), 0)::float8 AS avgdl
    FROM {schema}.text_stats m WHERE {OWNER}
),
tf AS MATERIALIZED (
    -- An index-only range scan per query lexeme: no document is read.
    SELECT p.id, p.lexeme, p.tf::float8 AS tf, p.doc_len, p.is_current
    FROM {schema}.postings p
    WHERE p.tenant = :tenant AND p.user_id = :user_id AND p.lexeme = ANY({query_lexemes(schema)}){corpus}
),
df AS (SELECT lexeme, count(*)::float8 AS df FROM tf GROUP BY lexeme),
scored AS (
    SELECT tf.id, sum({IDF} * tf.tf * {K1 + 1}::float8 / (tf.tf + {LENGTH_NORM})) AS score
    FROM tf JOIN df USING (lexeme) CROSS JOIN stats
    GROUP BY tf.id
)"""


def _best(schema: str, where: str) -> str:
    """The best ``k`` of ``scored``, each checked against the filters by its primary key until ``k`` pass."""
    return f"""SELECT s.id, s.score FROM (SELECT id, score FROM scored ORDER BY score DESC, id) s
CROSS JOIN LATERAL (SELECT 1 FROM {schema}.memories m WHERE {OWNER} AND m.id = s.id{where} LIMIT 1) wanted
ORDER BY s.score DESC, s.id
LIMIT :k"""


def bm25_sql(schema: str, query: str, k: int, filters: MemoryFilters) -> tuple[str, dict[str, Any]] | None:
    """The statement and its parameters; ``None`` when the query has no word to search for."""
    terms = query_terms(query)
    if not terms:
        return None
    where, params = filter_sql(filters, search=True)
    sql = f"WITH {_bm25_ctes(schema, filters)}\n{_best(schema, where)}"
    return sql, {"terms": " ".join(terms), "k": k, **params}


def bm25_with_counts_sql(
    schema: str, query: str, k: int, filters: MemoryFilters
) -> tuple[str, dict[str, Any]] | None:
    """``bm25_sql`` and ``term_counts_sql`` as one statement over the same postings (``None``: no word).

    Hits come first, best first (``id`` set); then the counts as ``term_counts_sql`` gives them
    (``id`` null; ``n`` on each, one row with a null ``lexeme`` when no lexeme is left). The
    postings the ranking reads are the counts' too: a query lexeme's current documents among them.
    """
    built = bm25_sql(schema, query, k, filters)
    if built is None:
        return None
    where, _ = filter_sql(filters, search=True)
    sql = f"""WITH {_bm25_ctes(schema, filters)},
q AS (SELECT DISTINCT l AS lexeme FROM unnest({query_lexemes(schema)}) l),
best AS ({_best(schema, where)})
SELECT u.id, u.score, u.n, u.lexeme, u.df FROM (
    SELECT b.id, b.score, NULL::float8 AS n, NULL::text AS lexeme, NULL::bigint AS df FROM best b
    UNION ALL
    SELECT NULL, NULL, stats.n, q.lexeme,
           (SELECT count(*) FROM tf WHERE tf.lexeme = q.lexeme AND tf.is_current)
    FROM stats LEFT JOIN q ON true
) u
ORDER BY u.id IS NULL, u.score DESC, u.id"""
    return sql, built[1]


def term_counts_sql(schema: str, query: str) -> tuple[str, dict[str, Any]]:
    """The user's searchable documents (``n``, on every row) and each query lexeme's document
    frequency (``lexeme``, ``df``; one row with both null when the query has no lexeme), read
    from ``text_stats`` and by an index-only count of the user's current ``postings`` per lexeme."""
    sql = f"""
WITH stats AS (SELECT coalesce(max(m.docs), 0)::bigint AS n FROM {schema}.text_stats m WHERE {OWNER}),
q AS (SELECT DISTINCT l AS lexeme FROM unnest({query_lexemes(schema)}) l)
SELECT stats.n, q.lexeme, (
    SELECT count(*) FROM {schema}.postings p
    WHERE p.tenant = :tenant AND p.user_id = :user_id AND p.lexeme = q.lexeme AND p.is_current
) AS df
FROM stats LEFT JOIN q ON true"""
    return sql, {"terms": " ".join(query_terms(query))}


def _ids_only() -> str:
    return "SELECT id, 1 - dist AS score FROM found ORDER BY dist, id LIMIT :k"


#: the dot product stage 2 ranks by (``<#>`` is pgvector's negative inner product)
FULL_SCORE = "-(m.embedding_full <#> CAST(:q_full AS vector))"


def _rescored(schema: str) -> str:
    # Ranked here against the full query vector: the rows' 1.5 kB full vectors never leave the
    # server (shipping 400 of them to rank in Python was most of the statement's time). The
    # index scan scored its rows as it read them (``ann``); the exact scan's ``k`` rows are
    # scored after its LIMIT, each by its primary key (a plain join let the planner hash the
    # user's every row instead; the LIMIT keeps the lateral subquery from being flattened).
    return f"""SELECT f.id, coalesce(f.score, v.score) AS score
FROM (SELECT id, dist, score FROM found ORDER BY dist, id LIMIT :k) f
LEFT JOIN LATERAL (
    SELECT {FULL_SCORE} AS score FROM {schema}.memories m
    WHERE f.score IS NULL AND {OWNER} AND m.id = f.id LIMIT 1) v ON true
WHERE coalesce(f.score, v.score) IS NOT NULL
ORDER BY 2 DESC, f.dist, f.id"""


def vector_sql(
    schema: str,
    query_coarse: np.ndarray,
    k: int,
    filters: MemoryFilters,
    exact_below: int,
    *,
    query_full: np.ndarray | None = None,
) -> tuple[str, dict[str, Any]]:
    """The statement and its parameters: ids with their coarse cosine similarity, best first.

    ``query_full``: the same hits (those with a full vector) scored and ranked instead by the dot
    product of their full vector with it (ties in the coarse order).
    """
    where, params = filter_sql(filters, search=True)
    candidates = f"{OWNER} AND m.embedding_coarse IS NOT NULL{where}"
    # Rescoring: the index scan scores each row it returns (its heap row is read anyway); the
    # exact scan leaves it to ``_rescored``, which scores only the ``k`` rows kept.
    scored, score, unscored = (
        ("", "", "")
        if query_full is None
        else (f", {FULL_SCORE} AS score", ", score", ", NULL::float8 AS score")
    )
    sql = f"""
WITH size AS MATERIALIZED (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM {schema}.memories m WHERE {OWNER} LIMIT :exact_below) s
),
ann AS MATERIALIZED (
    SELECT m.id, m.embedding_coarse <=> CAST(:q AS vector) AS dist{scored}
    FROM {schema}.memories m
    WHERE {candidates} AND (SELECT n FROM size) >= :exact_below
    ORDER BY m.embedding_coarse <=> CAST(:q AS vector)
    LIMIT :k
),
found AS (
    SELECT id, dist{score} FROM ann WHERE (SELECT count(*) FROM ann) >= :k
    UNION ALL
    (SELECT id, dist{unscored} FROM (
        -- OFFSET 0 keeps the planner from turning this back into an index scan.
        SELECT m.id, m.embedding_coarse <=> CAST(:q AS vector) AS dist
        FROM {schema}.memories m WHERE {candidates} OFFSET 0) e
     WHERE (SELECT count(*) FROM ann) < :k
     ORDER BY dist, id
     LIMIT :k)
)
{_ids_only() if query_full is None else _rescored(schema)}"""
    params.update(q=vector_text(query_coarse), k=k, exact_below=exact_below)
    if query_full is not None:
        params["q_full"] = vector_text(query_full)
    return sql, params
