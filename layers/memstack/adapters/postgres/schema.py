"""The PostgreSQL schema, as numbered migrations the adapter applies itself.

Each migration is a list of single statements (the RDS Data API runs one
statement per call) with ``{schema}`` and ``{coarse_dim}`` filled in. They run
in one transaction under a database-wide advisory lock, so two processes
starting at once apply each migration exactly once, and a failed migration
leaves the schema where it was. ``schema_migrations`` records what is
applied; ``settings`` records the coarse vector dimension the HNSW column
was made for, which start-up checks against ``MEMSTACK_COARSE_DIM``.

Every table is keyed by (tenant, user_id) first: each query of the store
filters by both, and each index leads with both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memstack.adapters.postgres.executor import SqlExecutor
from memstack.errors import SettingsError

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: pg_advisory_xact_lock key shared by every memstack migration in a database
#: (extensions are database-wide, so two schemas must not migrate at once)
MIGRATION_LOCK = "memstack-schema-migration"
#: the largest dimension pgvector's HNSW index takes for ``vector``
MAX_HNSW_DIM = 2000


def check_identifier(name: str) -> str:
    """A schema name safe to put in SQL unquoted (it is validated, never escaped)."""
    if not _IDENTIFIER.match(name):
        raise SettingsError(
            f"MEMSTACK_POSTGRES_SCHEMA: {name!r} is not a plain lower-case SQL name "
            "(letters, digits, underscores; at most 63)"
        )
    return name


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "memories, their sources, and the coarse vector dimension",
        (
            "CREATE EXTENSION IF NOT EXISTS vector",
            """CREATE TABLE {schema}.settings (key text PRIMARY KEY, value text NOT NULL)""",
            """INSERT INTO {schema}.settings (key, value) VALUES ('coarse_dim', '{coarse_dim}')""",
            """CREATE TABLE {schema}.memories (
                tenant text NOT NULL,
                user_id text NOT NULL,
                id text NOT NULL,
                seq bigint GENERATED ALWAYS AS IDENTITY,
                session_id text,
                scope text NOT NULL,
                tier text NOT NULL,
                kind text NOT NULL,
                category text,
                content text NOT NULL,
                search_text text,
                speaker text,
                event_time timestamptz,
                created_at timestamptz NOT NULL,
                is_current boolean NOT NULL,
                superseded_at timestamptz,
                deleted boolean NOT NULL DEFAULT false,
                replaces_id text,
                version integer NOT NULL,
                source_ids jsonb NOT NULL DEFAULT '[]',
                metadata jsonb NOT NULL DEFAULT '{{}}',
                embedding_full vector,
                embedding_coarse vector({coarse_dim}),
                PRIMARY KEY (tenant, user_id, id)
            )""",
            # Listing, newest first, and its cursor (created_at, seq).
            """CREATE INDEX memories_listing ON {schema}.memories (tenant, user_id, created_at, seq)""",
            """CREATE INDEX memories_replaces ON {schema}.memories (tenant, user_id, replaces_id)
                WHERE replaces_id IS NOT NULL""",
            """CREATE TABLE {schema}.memory_sources (
                tenant text NOT NULL,
                user_id text NOT NULL,
                source_id text NOT NULL,
                memory_id text NOT NULL,
                PRIMARY KEY (tenant, user_id, source_id, memory_id)
            )""",
        ),
    ),
    Migration(
        2,
        "keyword search: stemmed full text (no stop words) in a generated tsvector with a GIN index",
        (
            # English stemming like SQLite's porter tokenizer, but keeping every
            # word: the query side drops function words itself, and document
            # lengths (BM25's normalisation) count every word as FTS5 does.
            """CREATE TEXT SEARCH DICTIONARY {schema}.memstack_stem
                (TEMPLATE = pg_catalog.snowball, LANGUAGE = english)""",
            """CREATE TEXT SEARCH CONFIGURATION {schema}.memstack_english (COPY = pg_catalog.english)""",
            """ALTER TEXT SEARCH CONFIGURATION {schema}.memstack_english
                ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
                WITH {schema}.memstack_stem""",
            """CREATE FUNCTION {schema}.token_count(tsvector) RETURNS integer
                LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
                AS $$ SELECT coalesce(sum(cardinality(positions)), 0)::integer FROM unnest($1) $$""",
            """ALTER TABLE {schema}.memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS
                (to_tsvector('{schema}.memstack_english'::regconfig, coalesce(search_text, content)))
                STORED""",
            """ALTER TABLE {schema}.memories ADD COLUMN doc_len integer GENERATED ALWAYS AS
                ({schema}.token_count(to_tsvector('{schema}.memstack_english'::regconfig,
                 coalesce(search_text, content)))) STORED""",
            """CREATE INDEX memories_tsv ON {schema}.memories USING gin (tsv)""",
            # BM25's corpus statistics (documents, mean length) from the index alone.
            """CREATE INDEX memories_text_stats ON {schema}.memories (tenant, user_id) INCLUDE (doc_len)
                WHERE is_current AND NOT deleted""",
        ),
    ),
    Migration(
        3,
        "vector search: HNSW on the coarse prefix, iterative index scans by default",
        (
            """CREATE INDEX memories_coarse_hnsw ON {schema}.memories
                USING hnsw (embedding_coarse vector_cosine_ops) WITH (m = 16, ef_construction = 64)""",
            # Load pgvector in this session so its settings are known, then make
            # iterative scans the default for this role here: a filtered HNSW
            # scan then keeps going until it has k rows instead of stopping at
            # ef_search. (Set per role because Data API calls share no session.)
            """SELECT '[1]'::vector(1)""",
            """DO $$ BEGIN
                EXECUTE format('ALTER ROLE CURRENT_USER IN DATABASE %I SET hnsw.iterative_scan = %L',
                               current_database(), 'relaxed_order');
                EXECUTE format('ALTER ROLE CURRENT_USER IN DATABASE %I SET hnsw.ef_search = %L',
                               current_database(), '100');
            END $$""",
        ),
    ),
    Migration(
        4,
        "BM25 corpus statistics per user, kept by every write",
        (
            """CREATE TABLE {schema}.text_stats (
                tenant text NOT NULL,
                user_id text NOT NULL,
                docs bigint NOT NULL,
                total_len bigint NOT NULL,
                PRIMARY KEY (tenant, user_id)
            )""",
            """INSERT INTO {schema}.text_stats (tenant, user_id, docs, total_len)
                SELECT tenant, user_id, count(*), coalesce(sum(doc_len), 0) FROM {schema}.memories
                WHERE is_current AND NOT deleted GROUP BY tenant, user_id""",
            # Searches no longer count the user's documents.
            """DROP INDEX {schema}.memories_text_stats""",
        ),
    ),
    Migration(
        5,
        "erasure markers and the fence a write of work begun before an erase stops at",
        (
            # domain/erasure.py: a hash of (tenant, user), when, until when it is kept.
            """CREATE TABLE {schema}.erasures (
                key text PRIMARY KEY,
                erased_at float8 NOT NULL,
                expires_at float8 NOT NULL
            )""",
            # True when one of the users (erasure keys, a JSON array) was erased after
            # ``began``. The shared advisory lock per user, held to the end of the
            # writing transaction, orders the write against an erase (which takes it
            # exclusively): an erase that committed while this waited is seen, because
            # a VOLATILE function's queries each read a fresh snapshot; an erase that
            # comes later waits for the write to commit, then deletes what it wrote.
            """CREATE FUNCTION {schema}.erased_since(keys jsonb, began float8) RETURNS boolean
                LANGUAGE plpgsql VOLATILE AS $$
                DECLARE k text;
                BEGIN
                    FOR k IN SELECT value FROM jsonb_array_elements_text(keys) ORDER BY value LOOP
                        PERFORM pg_advisory_xact_lock_shared(hashtextextended('{schema}.' || k, 0));
                    END LOOP;
                    RETURN EXISTS (SELECT 1 FROM {schema}.erasures e
                                   WHERE e.key IN (SELECT jsonb_array_elements_text(keys))
                                     AND e.erased_at > began);
                END $$""",
        ),
    ),
    Migration(
        6,
        "tenants' configurations (custom categories, extraction instructions, ...), one versioned row each",
        (
            """CREATE TABLE {schema}.tenant_config (
                tenant text PRIMARY KEY,
                document jsonb NOT NULL,
                version integer NOT NULL,
                updated_at timestamptz NOT NULL
            )""",
        ),
    ),
    Migration(
        7,
        "BM25 postings: each searchable document's lexemes with their frequencies, kept by every write",
        (
            # A search reads the entries of its lexemes (index-only: the primary key carries every
            # column it needs) instead of the tsvector of every document holding one of them.
            """CREATE TABLE {schema}.postings (
                tenant text NOT NULL,
                user_id text NOT NULL,
                lexeme text NOT NULL,
                id text NOT NULL,
                tf integer NOT NULL,
                doc_len integer NOT NULL,
                is_current boolean NOT NULL,
                PRIMARY KEY (tenant, user_id, lexeme, id) INCLUDE (tf, doc_len, is_current)
            )""",
            """INSERT INTO {schema}.postings (tenant, user_id, lexeme, id, tf, doc_len, is_current)
                SELECT m.tenant, m.user_id, t.lexeme, m.id, cardinality(t.positions), m.doc_len, m.is_current
                FROM {schema}.memories m, unnest(m.tsv) t WHERE NOT m.deleted""",
        ),
    ),
    Migration(
        8,
        "contradictions: the ids of the current memories each memory contradicts",
        ("""ALTER TABLE {schema}.memories ADD COLUMN conflicts_with jsonb NOT NULL DEFAULT '[]'""",),
    ),
)

LATEST = MIGRATIONS[-1].version


def _render(statement: str, schema: str, coarse_dim: int) -> str:
    return statement.format(schema=schema, coarse_dim=int(coarse_dim))


def applied_versions(executor: SqlExecutor, schema: str) -> list[int]:
    """Versions applied in ``schema`` (empty when the schema or its bookkeeping does not exist)."""
    exists = executor.query(
        "SELECT to_regclass(:table) IS NOT NULL AS present", {"table": f"{schema}.schema_migrations"}
    )
    if not exists or not exists[0]["present"]:
        return []
    rows = executor.query(f"SELECT version FROM {schema}.schema_migrations ORDER BY version")
    return [int(r["version"]) for r in rows]


def migrate(executor: SqlExecutor, schema: str, coarse_dim: int, *, target: int = LATEST) -> list[Migration]:
    """Apply every migration up to ``target`` not yet applied; returns those it applied."""
    check_identifier(schema)
    if not 1 <= coarse_dim <= MAX_HNSW_DIM:
        raise SettingsError(
            f"MEMSTACK_COARSE_DIM: pgvector's HNSW index takes at most {MAX_HNSW_DIM} dimensions"
        )
    wanted = {m.version for m in MIGRATIONS if m.version <= target}
    if wanted <= set(applied_versions(executor, schema)):
        # The usual start-up (every Lambda cold start): one read, no lock, no transaction.
        check_coarse_dim(executor, schema, coarse_dim)
        return []
    done: list[Migration] = []
    with executor.transaction() as tx:
        tx.query("SELECT pg_advisory_xact_lock(hashtext(:key)) IS NULL AS locked", {"key": MIGRATION_LOCK})
        tx.query(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        tx.query(
            f"""CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        applied = set(applied_versions(tx, schema))
        for migration in MIGRATIONS:
            if migration.version in applied or migration.version > target:
                continue
            for statement in migration.statements:
                tx.query(_render(statement, schema, coarse_dim))
            tx.query(
                f"INSERT INTO {schema}.schema_migrations (version, name) VALUES (:version, :name)",
                {"version": migration.version, "name": migration.name},
            )
            done.append(migration)
    check_coarse_dim(executor, schema, coarse_dim)
    return done


def check_coarse_dim(executor: SqlExecutor, schema: str, coarse_dim: int) -> None:
    rows = executor.query(f"SELECT value FROM {schema}.settings WHERE key = 'coarse_dim'")
    stored = int(rows[0]["value"]) if rows else None
    if stored is not None and stored != coarse_dim:
        raise SettingsError(
            f"MEMSTACK_COARSE_DIM is {coarse_dim} but the database schema {schema!r} holds "
            f"{stored}-dimensional coarse vectors; use the same value, or another MEMSTACK_POSTGRES_SCHEMA"
        )
