"""The ``MemoryStore`` port on PostgreSQL + pgvector, through a ``SqlExecutor``.

Every write is one statement, hence one transaction, even over the Data API:
``put`` inserts a batch of records and their sources together; ``supersede``
retires the old version only if it is still current and inserts the new one
only if it did (a conditional update: of two concurrent updates of the same
version, the second waits for the first's row lock, then finds it no longer
current and changes nothing); ``erase_user`` deletes the user's rows from
both tables. Every statement is filtered by tenant and user.
"""

from __future__ import annotations

import builtins
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from memstack.adapters.postgres import search, writes
from memstack.adapters.postgres.connect import build_executor
from memstack.adapters.postgres.executor import (
    DuplicateKey,
    SqlExecutor,
    json_text,
    vector_from_binary,
)
from memstack.adapters.postgres.filters import OWNER, filter_sql
from memstack.adapters.postgres.records import (
    EPOCH,
    RECORD_COLUMNS,
    from_micros,
    micros,
    micros_sql,
    record_batches,
    record_from_row,
    records_json,
    time_sql,
)
from memstack.adapters.postgres.schema import check_identifier, migrate
from memstack.domain.cursors import decode_row_position, encode_position
from memstack.domain.erasure import RETENTION_SECONDS, Fence, erased_while_working, erasure_key
from memstack.errors import BadRequest, Conflict
from memstack.models import ListOrder, MemoryFilters, MemoryRecord, ScoredId, UserSummary
from memstack.ports.store import TermCounts
from memstack.ports.tenant_config import TenantConfigStore
from memstack.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.ports.stm import ShortTermStore


class PostgresMemoryStore:
    """Memory records in ``{schema}.memories``; sources in ``{schema}.memory_sources``."""

    def __init__(
        self,
        executor: SqlExecutor,
        *,
        schema: str = "memstack",
        coarse_dim: int = 128,
        embedding_dim: int = 384,
        exact_below: int = 2000,
        migrate_on_start: bool = True,
    ) -> None:
        self.executor = executor
        self.schema = check_identifier(schema)
        self.coarse_dim = coarse_dim
        self.embedding_dim = embedding_dim
        self.exact_below = exact_below
        if migrate_on_start:
            migrate(executor, self.schema, coarse_dim)
        self._insert_sql = writes.insert_sql(self.schema)
        self._supersede_sql = writes.supersede_sql(self.schema)

    @classmethod
    def from_settings(cls, settings: Settings, rds_data_client: Any | None = None) -> PostgresMemoryStore:
        """The store the settings name: psycopg on ``postgres_dsn``, or the Data API on the cluster."""
        return cls(
            build_executor(settings, rds_data_client),
            schema=settings.postgres.schema_name,
            coarse_dim=settings.embedding.coarse_dim,
            embedding_dim=settings.embedding.embedding_dim,
            exact_below=settings.postgres.exact_search_below,
            migrate_on_start=settings.postgres.migrate_on_start,
        )

    # ------------------------------------------------------------------ writes
    @staticmethod
    def _fence(records: builtins.list[MemoryRecord], fence: Fence | None) -> dict[str, Any]:
        """The write's erase fence (``writes``): its users, when the write carries a fence."""
        if fence is None:
            return {"fence_keys": "[]", "fence_began": 0.0}
        keys = sorted({erasure_key(r.tenant, r.user_id) for r in records})
        return {"fence_keys": json_text(keys), "fence_began": fence.began}

    def put(self, records: builtins.list[MemoryRecord], *, fence: Fence | None = None) -> None:
        if not records:
            return
        batches = record_batches(records, self.executor.max_request_bytes)
        guard = self._fence(records, fence)
        try:
            if len(batches) == 1:
                rows = self.executor.query(self._insert_sql, {"records": batches[0], **guard})
                _refuse_if_fenced(rows)
                return
            with self.executor.transaction() as tx:  # still all or nothing
                for batch in batches:
                    _refuse_if_fenced(tx.query(self._insert_sql, {"records": batch, **guard}))
        except DuplicateKey as exc:
            raise Conflict("a memory with one of these ids already exists") from exc

    def supersede(
        self, tenant: str, user_id: str, old_id: str, new: MemoryRecord, *, fence: Fence | None = None
    ) -> None:
        if (new.tenant, new.user_id) != (tenant, user_id):
            raise BadRequest("a new version must belong to the same tenant and user")
        try:
            rows = self.executor.query(
                self._supersede_sql,
                {
                    "tenant": tenant,
                    "user_id": user_id,
                    "old_id": old_id,
                    "superseded_at": micros(new.created_at),
                    "records": records_json([new]),
                    **self._fence([new], fence),
                },
            )
        except DuplicateKey as exc:
            raise Conflict(f"memory {new.id} already exists") from exc
        _refuse_if_fenced(rows)
        if not rows or int(rows[0]["retired"]) == 0:
            raise Conflict(f"memory {old_id} is not the current version")

    def mark(self, tenant: str, user_id: str, ids: list[str], **fields: object) -> int:
        if not ids or not fields:
            return 0
        # Only rows where some field differs change (what the embedded store counts).
        rows = self.executor.query(
            writes.mark_sql(self.schema),
            {"tenant": tenant, "user_id": user_id, "ids": json_text(ids), "patch": json_text(fields)},
        )
        return len(rows)

    def link_conflicts(self, tenant: str, user_id: str, links: dict[str, builtins.list[str]]) -> int:
        if not links:
            return 0
        rows = self.executor.query(
            writes.link_conflicts_sql(self.schema),
            {"tenant": tenant, "user_id": user_id, "links": json_text(links)},
        )
        return len(rows)

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        """Marker and rows in one transaction, behind the user's erase lock (see ``writes``)."""
        key = erasure_key(tenant, user_id)
        now = time.time()
        with self.executor.transaction() as tx:
            # The lock first, in its own statement: the deletes then read a snapshot taken
            # after every fenced write that held the lock has committed.
            tx.query(writes.erase_lock_sql(self.schema), {"key": key})
            rows = tx.query(
                writes.erase_sql(self.schema),
                {
                    "tenant": tenant,
                    "user_id": user_id,
                    "key": key,
                    "now": now,
                    "expires": now + RETENTION_SECONDS,
                },
            )
        return {"memories": int(rows[0]["memories"]) if rows else 0}

    # ------------------------------------------------------------------- reads
    def _records(self, where: str, params: dict[str, Any], tail: str = "") -> builtins.list[MemoryRecord]:
        rows = self.executor.query(
            f"SELECT {RECORD_COLUMNS} FROM {self.schema}.memories m WHERE {OWNER}{where}{tail}", params
        )
        return [record_from_row(r) for r in rows]

    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        found = self._records(" AND m.id = :id", {"tenant": tenant, "user_id": user_id, "id": memory_id})
        return found[0] if found else None

    def get_many(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, MemoryRecord]:
        if not ids:
            return {}
        found = self._records(
            " AND m.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))",
            {"tenant": tenant, "user_id": user_id, "ids": json_text(ids)},
        )
        return {r.id: r for r in found}

    def records_with_vectors(
        self, tenant: str, user_id: str, ids: builtins.list[str], vectors_of: builtins.list[str]
    ) -> tuple[dict[str, MemoryRecord], dict[str, np.ndarray]]:
        """``get_many`` and ``embeddings`` in one statement (``ports.store.RecordsWithVectors``)."""
        if self.executor.max_result_bytes is not None:
            # A result limit (the Data API's 1 MB) would have to hold the records and the vectors:
            # two reads instead, each of which keeps within it.
            records = self.get_many(tenant, user_id, ids)
            return records, self.embeddings(tenant, user_id, [i for i in vectors_of if i in records])
        if not ids:
            return {}, {}
        rows = self.executor.query(
            f"""SELECT {RECORD_COLUMNS},
                  CASE WHEN m.id IN (SELECT jsonb_array_elements_text(CAST(:vectors_of AS jsonb)))
                       THEN vector_send(m.embedding_full) END AS embedding
                FROM {self.schema}.memories m
                WHERE {OWNER} AND m.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))""",
            {
                "tenant": tenant,
                "user_id": user_id,
                "ids": json_text(ids),
                "vectors_of": json_text(vectors_of),
            },
        )
        records = {r["id"]: record_from_row(r) for r in rows}
        vectors = {r["id"]: v for r in rows if (v := vector_from_binary(r["embedding"])) is not None}
        return records, vectors

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        found = self._records(
            " AND m.replaces_id = :id", {"tenant": tenant, "user_id": user_id, "id": memory_id}, " LIMIT 1"
        )
        return found[0] if found else None

    def successors(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, MemoryRecord]:
        """``successor`` of every id in one statement (``ports.store.SuccessorsInOneRead``)."""
        if not ids:
            return {}
        # One per id, as ``successor``'s LIMIT 1 (a chain never forks: ``supersede`` is conditional).
        found = self._records(
            " AND m.replaces_id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))",
            {"tenant": tenant, "user_id": user_id, "ids": json_text(ids)},
            " ORDER BY m.replaces_id, m.seq",
        )
        out: dict[str, MemoryRecord] = {}
        for record in found:
            if record.replaces_id is not None:
                out.setdefault(record.replaces_id, record)
        return out

    def find_by_source(self, tenant: str, user_id: str, source_id: str) -> builtins.list[MemoryRecord]:
        return self._records(
            f""" AND m.id IN (SELECT s.memory_id FROM {self.schema}.memory_sources s
                 WHERE s.tenant = :tenant AND s.user_id = :user_id AND s.source_id = :source_id)""",
            {"tenant": tenant, "user_id": user_id, "source_id": source_id},
            " ORDER BY m.seq",
        )

    def find_by_sources(
        self, tenant: str, user_id: str, source_ids: builtins.list[str]
    ) -> dict[str, builtins.list[MemoryRecord]]:
        """``find_by_source`` of every id in one statement (``ports.store.SourcesInOneRead``)."""
        out: dict[str, builtins.list[MemoryRecord]] = {s: [] for s in source_ids}
        if not source_ids:
            return out
        rows = self.executor.query(
            f"""SELECT s.source_id, {RECORD_COLUMNS} FROM {self.schema}.memory_sources s
                JOIN {self.schema}.memories m
                  ON m.tenant = s.tenant AND m.user_id = s.user_id AND m.id = s.memory_id
                WHERE s.tenant = :tenant AND s.user_id = :user_id
                  AND s.source_id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))
                ORDER BY m.seq""",
            {"tenant": tenant, "user_id": user_id, "ids": json_text(source_ids)},
        )
        for row in rows:
            out[row["source_id"]].append(record_from_row(row))
        return out

    def tenants(self) -> builtins.list[str]:
        rows = self.executor.query(
            f'SELECT DISTINCT tenant COLLATE "C" AS tenant FROM {self.schema}.memories ORDER BY 1', {}
        )
        return [str(r["tenant"]) for r in rows]

    def users(
        self, tenant: str, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[UserSummary], str | None]:
        # One grouped read of the tenant's rows; byte order (COLLATE "C") as every other backend.
        live = "m.is_current AND NOT m.deleted"
        rows = self.executor.query(
            f"SELECT m.user_id, count(*) FILTER (WHERE m.tier = 'stm' AND {live}) AS stm, "
            f"count(*) FILTER (WHERE m.tier = 'ltm' AND {live}) AS ltm, "
            f"{time_sql('max(m.created_at)')} AS last_write "
            f'FROM {self.schema}.memories m WHERE m.tenant = :tenant AND m.user_id COLLATE "C" > :after '
            'GROUP BY m.user_id ORDER BY m.user_id COLLATE "C" LIMIT :limit',
            {"tenant": tenant, "after": cursor or "", "limit": limit + 1},
        )
        page = [
            UserSummary(
                user_id=str(r["user_id"]),
                stm=int(r["stm"]),
                ltm=int(r["ltm"]),
                last_write=from_micros(r["last_write"]),
            )
            for r in rows[:limit]
        ]
        return page, (page[-1].user_id if len(rows) > limit else None)

    def list(
        self,
        tenant: str,
        user_id: str,
        filters: MemoryFilters,
        limit: int,
        cursor: str | None = None,
        order: ListOrder = "created_at",
    ) -> tuple[builtins.list[MemoryRecord], str | None]:
        where, params = filter_sql(filters, search=False)
        where += " AND NOT m.deleted"
        # The event time is what the after/before filters compare: event_time, else created_at.
        when = "m.created_at" if order == "created_at" else "coalesce(m.event_time, m.created_at)"
        if cursor:
            at, seq = _decode_cursor(cursor)
            where += f" AND ({when}, m.seq) < ({micros_sql(':c_at')}, :c_seq)"
            params.update(c_at=at, c_seq=seq)
        rows = self.executor.query(
            f"SELECT {RECORD_COLUMNS}, {time_sql(when)} AS list_position "
            f"FROM {self.schema}.memories m WHERE {OWNER}{where} "
            f"ORDER BY {when} DESC, m.seq DESC LIMIT :limit",
            {"tenant": tenant, "user_id": user_id, "limit": limit + 1, **params},
        )
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit and page:
            last = page[-1]
            next_cursor = encode_position(float(last["list_position"]), last["seq"])
        return [record_from_row(r) for r in page], next_cursor

    def bm25_search(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        built = search.bm25_sql(self.schema, query, k, filters)
        if built is None:
            return []
        sql, params = built
        rows = self.executor.query(sql, {"tenant": tenant, "user_id": user_id, **params})
        return [ScoredId(id=r["id"], score=float(r["score"])) for r in rows]

    def bm25_with_counts(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> tuple[builtins.list[ScoredId], TermCounts]:
        """``bm25_search`` and ``term_counts`` in one statement (``ports.store.Bm25WithTermCounts``)."""
        built = search.bm25_with_counts_sql(self.schema, query, k, filters)
        if built is None:  # no word to rank by: the counts alone
            return [], self.term_counts(tenant, user_id, query)
        sql, params = built
        rows = self.executor.query(sql, {"tenant": tenant, "user_id": user_id, **params})
        hits = [ScoredId(id=r["id"], score=float(r["score"])) for r in rows if r["id"] is not None]
        return hits, _term_counts([r for r in rows if r["id"] is None])

    def term_counts(self, tenant: str, user_id: str, query: str) -> TermCounts:
        """Document frequencies of the query's lexemes among the user's current postings."""
        sql, params = search.term_counts_sql(self.schema, query)
        return _term_counts(self.executor.query(sql, {"tenant": tenant, "user_id": user_id, **params}))

    def vector_search(
        self, tenant: str, user_id: str, query_coarse: np.ndarray, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        sql, params = search.vector_sql(self.schema, query_coarse, k, filters, self.exact_below)
        rows = self.executor.query(sql, {"tenant": tenant, "user_id": user_id, **params})
        return [ScoredId(id=r["id"], score=float(r["score"])) for r in rows]

    def rescored_candidates(
        self,
        tenant: str,
        user_id: str,
        query_coarse: np.ndarray,
        query_full: np.ndarray,
        k: int,
        filters: MemoryFilters,
    ) -> builtins.list[ScoredId]:
        """The coarse hits ranked by full dot product, one statement (``ports.store.RescoredCandidates``)."""
        sql, params = search.vector_sql(
            self.schema, query_coarse, k, filters, self.exact_below, query_full=query_full
        )
        rows = self.executor.query(sql, {"tenant": tenant, "user_id": user_id, **params})
        return [ScoredId(id=r["id"], score=float(r["score"])) for r in rows]

    def embeddings(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        # A result limit (the Data API's 1 MB) caps how many vectors one statement returns.
        per_statement = len(ids)
        if self.executor.max_result_bytes is not None:
            per_statement = max(1, self.executor.max_result_bytes // (4 * self.embedding_dim + 64))
        for start in range(0, len(ids), max(per_statement, 1)):
            rows = self.executor.query(
                f"""SELECT m.id, vector_send(m.embedding_full) AS embedding FROM {self.schema}.memories m
                    WHERE {OWNER} AND m.embedding_full IS NOT NULL
                      AND m.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))""",
                {"tenant": tenant, "user_id": user_id, "ids": json_text(ids[start : start + per_statement])},
            )
            for r in rows:
                vector = vector_from_binary(r["embedding"])
                if vector is not None:
                    out[r["id"]] = vector
        return out

    def analyze(self) -> None:
        """Refresh the planner's statistics now; worth it after a bulk load (autovacuum does it later).

        Until then the planner may think the table is small and rank every row exactly
        instead of using the HNSW index.
        """
        for table in ("memories", "memory_sources", "text_stats", "postings"):
            self.executor.query(f"ANALYZE {self.schema}.{table}")

    def tenant_config_store(self) -> TenantConfigStore:
        """Tenants' configurations in the same schema (``ports.tenant_config``, migration 6)."""
        from memstack.adapters.postgres.tenant_config import PostgresTenantConfigStore

        return PostgresTenantConfigStore(self.executor, self.schema)

    def close(self) -> None:
        self.executor.close()


def _term_counts(rows: builtins.list[dict[str, Any]]) -> TermCounts:
    """``TermCounts`` of ``search.term_counts_sql``'s rows (``n`` on each, a null lexeme for none)."""
    docs = int(rows[0]["n"]) if rows else 0
    return TermCounts(docs, {r["lexeme"]: int(r["df"]) for r in rows if r["lexeme"] is not None})


def _refuse_if_fenced(rows: builtins.list[dict[str, Any]]) -> None:
    """``Erased`` when the statement's fence refused the write (it then wrote nothing)."""
    if rows and rows[0].get("refused"):
        raise erased_while_working()


#: the microseconds a cursor may hold: Python's datetime range (years 1 to 9999), inside PostgreSQL's
_CURSOR_MICROS = (
    (datetime.min.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1),
    (datetime.max.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1),
)


def _decode_cursor(cursor: str) -> tuple[int, int]:
    """(created_at in microseconds, seq) of a cursor ``list`` issued; ``BadRequest`` for anything else.

    Range-checked here so a forged position never reaches PostgreSQL as a
    timestamp or bigint it cannot hold (an error there would be a 500).
    """
    created, seq = decode_row_position(cursor)
    if not _CURSOR_MICROS[0] <= created <= _CURSOR_MICROS[1] or not created.is_integer():
        raise BadRequest("cursor is not one this API returned")
    return int(created), seq


def build(settings: Settings, clients: Mapping[str, Any], stm: ShortTermStore | None) -> PostgresMemoryStore:
    """``MEMSTACK_STORE_BACKEND=postgres``; ``clients["rds_data"]`` for the Data API (``factory.STORES``)."""
    return PostgresMemoryStore.from_settings(settings, clients.get("rds_data"))
