"""The ``opensearch`` memory store (medium and large tiers): BM25 + k-NN in one cluster.

- Index: ``<alias>-v<N>`` from one index template, used through the alias
  (``mapping``, ``index``). Created on first use in a container (idempotent).
- Writes: the bulk API with the refresh policy from settings. ``supersede``
  sends the retired old version (``is_current=false``, guarded by
  ``if_seq_no``/``if_primary_term``) and the new version in ONE bulk request;
  bulk is not a transaction, so when exactly one half fails the other is
  undone before ``Conflict`` is raised.
- Search: ``hybrid_candidates`` sends the BM25 and the filtered k-NN query in
  one ``_msearch``; ``bm25_search``/``vector_search`` are the same queries sent
  alone. Fusion and every later stage stay in the shared pipeline.
- Erase: first an erasure marker (``<alias>-erasures``, one document per
  hashed tenant + user, no user id in it), then a refresh (so writes sent
  without one are found), a delete-by-query on tenant + user, waited for,
  refreshed and counted, then a background force merge with
  ``only_expunge_deletes`` so the deleted documents leave the segments.
- Erase is final (``domain.erasure``): a write of work that began before the
  user's last erasure is refused. OpenSearch has no transactions, so the
  marker is read (a realtime GET) before the write and again after it; a
  write that lands while an erase runs is found by that second read and
  taken back. Either the erase's delete-by-query sees the write, or the
  write's second read sees the marker.
- Retries: 429/5xx/connection errors, bounded, exponential backoff with
  jitter (``client.with_retries``), including items a bulk rejected with 429.
"""

from __future__ import annotations

import base64
import builtins
import json
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memstack.adapters.opensearch import mapping, queries
from memstack.adapters.opensearch.index import Op, OpenSearchIndex, status_of
from memstack.domain.erasure import RETENTION_SECONDS, Erased, Fence, erasure_key, refuse_if_erased
from memstack.errors import BadRequest, Conflict, DependencyFailed
from memstack.models import ListOrder, MemoryFilters, MemoryRecord, ScoredId, UserSummary
from memstack.ports.stm import ErasureLog
from memstack.settings import Settings

_OK = (200, 201)


class OpenSearchMemoryStore(OpenSearchIndex):
    """The ``MemoryStore`` port on an OpenSearch index (managed domain or serverless collection)."""

    @classmethod
    def from_settings(
        cls, settings: Settings, client: Any | None = None, erasure_log: ErasureLog | None = None
    ) -> OpenSearchMemoryStore:
        """The store for the configured engine: a managed domain (``es``) or a serverless collection.

        ``erasure_log``: what fences a serverless collection's writes (it has no consistent read).
        """
        store_class: type[OpenSearchMemoryStore] = cls
        extra: dict[str, Any] = {}
        if settings.opensearch.service == "aoss":
            from memstack.adapters.opensearch.serverless import ServerlessMemoryStore

            store_class = ServerlessMemoryStore
            extra["visibility_seconds"] = settings.opensearch.visibility_seconds
            extra["erasure_log"] = erasure_log
        return store_class(
            client,
            **extra,
            alias=settings.opensearch.index,
            embedding_dim=settings.embedding.embedding_dim,
            coarse_dim=settings.embedding.coarse_dim,
            engine=settings.opensearch.engine,
            m=settings.opensearch.hnsw_m,
            ef_construction=settings.opensearch.hnsw_ef_construction,
            refresh=None if settings.opensearch.service == "aoss" else settings.opensearch.refresh,
            endpoint=settings.opensearch.endpoint,
            service=settings.opensearch.service,
            region=settings.aws.aws_region,
        )

    def _create_op(self, record: MemoryRecord) -> Op:
        did = mapping.doc_id(record.tenant, record.user_id, record.id)
        return {"create": {"_index": self.alias, "_id": did}}, mapping.to_doc(record)

    def _delete_op(self, tenant: str, user_id: str, memory_id: str) -> Op:
        return {"delete": {"_index": self.alias, "_id": mapping.doc_id(tenant, user_id, memory_id)}}, None

    @staticmethod
    def _failure(result: dict[str, Any], what: str) -> Exception:
        if result.get("status") == 409:
            return Conflict(what)
        reason = (result.get("error") or {}).get("reason", "unknown error")
        return DependencyFailed(f"OpenSearch rejected the write: {reason}")

    # --------------------------------------------------------- erase fence
    @property
    def erasures_index(self) -> str:
        """Where erasure markers live: outside ``<alias>-v*``, so no memory template or search sees them."""
        return f"{self.alias}-erasures"

    def _erased_at(self, tenant: str, user_id: str) -> float | None:
        """When the user was last erased (epoch seconds), from a realtime GET of the marker."""
        try:
            got = self._call(
                "read erasure",
                self.client.get,
                expect=(404,),
                index=self.erasures_index,
                id=erasure_key(tenant, user_id),
            )
        except Exception as exc:
            if status_of(exc) == 404:  # no marker, or no erasure ever (the index does not exist yet)
                return None
            raise
        if not isinstance(got, dict) or not got.get("found"):
            return None
        return float(got["_source"]["erased_at"])

    def _record_erasure(self, tenant: str, user_id: str) -> None:
        now = time.time()
        self._call(
            "record erasure",
            self.client.index,
            index=self.erasures_index,
            id=erasure_key(tenant, user_id),
            body={"erased_at": now, "expires_at": int(now + RETENTION_SECONDS)},
            refresh="true",
        )

    def _refuse_if_erased(self, owners: Iterable[tuple[str, str]], fence: Fence | None) -> None:
        """``Erased`` when the work writing (``fence``) began before an erasure of one of ``owners``."""
        if fence is None:
            return
        for tenant, user_id in sorted(set(owners)):
            refuse_if_erased(fence, self._erased_at(tenant, user_id))

    def _fenced_write(
        self,
        records: builtins.list[MemoryRecord],
        write: Callable[[], builtins.list[Op]],
        fence: Fence | None,
    ) -> None:
        """Run ``write()`` (it returns the ops that undo it) between two reads of the erasure markers.

        An erasure the second read finds, newer than the work, takes the write back and raises ``Erased``.
        """
        owners = [(r.tenant, r.user_id) for r in records]
        self._refuse_if_erased(owners, fence)
        undo = write()
        try:
            self._refuse_if_erased(owners, fence)
        except Erased:
            if undo:
                self._bulk(undo)
            raise

    def put(self, records: builtins.list[MemoryRecord], *, fence: Fence | None = None) -> None:
        if not records:
            return
        keys = [(r.tenant, r.user_id, r.id) for r in records]
        if len(set(keys)) != len(keys):
            raise Conflict("the same memory id appears twice in one write")
        self._ensure()
        self._fenced_write(records, lambda: self._put(records), fence)

    def _put(self, records: builtins.list[MemoryRecord]) -> builtins.list[Op]:
        results = self._bulk([self._create_op(r) for r in records])
        failed = [(r, res) for r, res in zip(records, results, strict=True) if res.get("status") not in _OK]
        if failed:
            # All or nothing, as the other backends: take back what this call did create.
            created = [r for r, res in zip(records, results, strict=True) if res.get("status") in _OK]
            if created:
                self._bulk([self._delete_op(r.tenant, r.user_id, r.id) for r in created])
            record, result = failed[0]
            raise self._failure(result, f"memory {record.id} already exists")
        return [self._delete_op(r.tenant, r.user_id, r.id) for r in records]

    def supersede(
        self, tenant: str, user_id: str, old_id: str, new: MemoryRecord, *, fence: Fence | None = None
    ) -> None:
        if (new.tenant, new.user_id) != (tenant, user_id):
            raise BadRequest("a new version must belong to the same tenant and user")
        self._ensure()
        self._fenced_write([new], lambda: self._supersede(tenant, user_id, old_id, new), fence)

    def _supersede(self, tenant: str, user_id: str, old_id: str, new: MemoryRecord) -> builtins.list[Op]:
        old_did = mapping.doc_id(tenant, user_id, old_id)
        got = self._get_doc(old_did, vectors=True)
        if got is None:
            raise Conflict(f"memory {old_id} is not the current version")
        source = got["_source"]
        if not source.get("is_current") or source.get("tenant") != tenant:
            raise Conflict(f"memory {old_id} is not the current version")
        retired = {**source, "is_current": False, "superseded_at": new.created_at.isoformat()}
        guard = {"if_seq_no": got["_seq_no"], "if_primary_term": got["_primary_term"]}
        ops: builtins.list[Op] = [
            ({"index": {"_index": self.alias, "_id": old_did, **guard}}, retired),
            self._create_op(new),
        ]
        retire_result, create_result = self._bulk(ops)
        retired_ok = retire_result.get("status") in _OK
        created_ok = create_result.get("status") in _OK
        if retired_ok and created_ok:
            return [self._delete_op(tenant, user_id, new.id)]
        if created_ok:  # a concurrent update retired the old version first: withdraw ours
            self._bulk([self._delete_op(tenant, user_id, new.id)])
            raise self._failure(retire_result, f"memory {old_id} is not the current version")
        if retired_ok:  # the new id was taken: put the old version back as it was
            back = {"if_seq_no": retire_result["_seq_no"], "if_primary_term": retire_result["_primary_term"]}
            self._bulk([({"index": {"_index": self.alias, "_id": old_did, **back}}, source)])
            raise self._failure(create_result, f"memory {new.id} already exists")
        raise self._failure(retire_result, f"memory {old_id} is not the current version")

    def mark(self, tenant: str, user_id: str, ids: builtins.list[str], **fields: object) -> int:
        current = self.get_many(tenant, user_id, ids)
        ops: builtins.list[Op] = []
        for memory_id, record in current.items():
            if all(record.metadata.get(k) == v for k, v in fields.items()):
                continue
            did = mapping.doc_id(tenant, user_id, memory_id)
            metadata = {**record.metadata, **fields}
            ops.append(
                (
                    {"update": {"_index": self.alias, "_id": did}},
                    {"doc": {"metadata": metadata, **mapping.metadata_fields(metadata)}},
                )
            )
        if not ops:
            return 0
        return sum(
            1 for res in self._bulk(ops) if res.get("status") in _OK and res.get("result") == "updated"
        )

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        self._ensure()
        # The marker first: from now on a write of work begun before it is refused or taken back.
        self._record_erasure(tenant, user_id)
        # Writes sent without a refresh are not searchable yet; delete-by-query only finds what is.
        self._call("refresh", self.client.indices.refresh, index=self.alias)
        deleted = self._delete_by_query(tenant, user_id)
        # Deleted documents stay in their segments until a merge: expunge them (in the background).
        self._call(
            "expunge deletes",
            self.client.indices.forcemerge,
            index=self.alias,
            only_expunge_deletes=True,
            wait_for_completion=False,
        )
        return {"memories": deleted}

    def _delete_by_query(self, tenant: str, user_id: str) -> int:
        deleted = 0
        for _ in range(self.attempts):
            response = self._call(
                "delete by query",
                self.client.delete_by_query,
                index=self.alias,
                body=queries.erase_body(tenant, user_id),
                refresh=True,
                wait_for_completion=True,
                conflicts="proceed",
            )
            if response.get("failures"):
                raise DependencyFailed(f"OpenSearch could not erase the user: {response['failures'][:1]}")
            deleted += int(response.get("deleted", 0))
            # A write racing with the erase shows up as a version conflict: go round again.
            if not response.get("version_conflicts"):
                break
        return deleted

    # ------------------------------------------------------------------ reads
    def _get_doc(self, did: str, *, vectors: bool = False) -> dict[str, Any] | None:
        kwargs: dict[str, Any] = {"index": self.alias, "id": did}
        if not vectors:
            kwargs["_source_excludes"] = queries.NO_VECTORS
        try:
            got = self._call("get", self.client.get, expect=(404,), **kwargs)
        except Exception as exc:
            if status_of(exc) == 404:
                return None
            raise
        return got if isinstance(got, dict) and got.get("found", True) else None

    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        self._ensure()
        got = self._get_doc(mapping.doc_id(tenant, user_id, memory_id))
        if not got or not got.get("found", True):
            return None
        record = mapping.from_source(got["_source"])
        return record if (record.tenant, record.user_id) == (tenant, user_id) else None

    def _mget(self, tenant: str, user_id: str, ids: builtins.list[str], **source: Any) -> builtins.list[dict]:
        if not ids:
            return []
        self._ensure()
        dids = [mapping.doc_id(tenant, user_id, i) for i in dict.fromkeys(ids)]
        response = self._call("mget", self.client.mget, index=self.alias, body={"ids": dids}, **source)
        return [
            d["_source"]
            for d in response.get("docs", [])
            if d.get("found")
            and d["_source"].get("tenant") == tenant
            and d["_source"].get("user_id") == user_id
        ]

    def get_many(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, MemoryRecord]:
        sources = self._mget(tenant, user_id, ids, _source_excludes=queries.NO_VECTORS)
        return {r.id: r for r in map(mapping.from_source, sources)}

    def embeddings(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        sources = self._mget(
            tenant, user_id, ids, _source_includes=["memory_id", "tenant", "user_id", "embedding_full"]
        )
        return {
            s["memory_id"]: np.asarray(s["embedding_full"], dtype=np.float32)
            for s in sources
            if s.get("embedding_full") is not None
        }

    def _search(self, body: dict[str, Any], what: str = "search") -> builtins.list[dict[str, Any]]:
        self._ensure()
        response = self._call(what, self.client.search, index=self.alias, body=body)
        return _hits(response)

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        hits = self._search(queries.term_body(tenant, user_id, "replaces_id", memory_id, 1))
        return mapping.from_source(hits[0]["_source"]) if hits else None

    def find_by_source(self, tenant: str, user_id: str, source_id: str) -> builtins.list[MemoryRecord]:
        hits = self._search(queries.term_body(tenant, user_id, "source_ids", source_id, 1000))
        return [mapping.from_source(h["_source"]) for h in hits]

    def list(
        self,
        tenant: str,
        user_id: str,
        filters: MemoryFilters,
        limit: int,
        cursor: str | None = None,
        order: ListOrder = "created_at",
    ) -> tuple[builtins.list[MemoryRecord], str | None]:
        search_after = None
        if cursor:
            try:
                search_after = json.loads(base64.urlsafe_b64decode(cursor.encode()).decode())
                if not isinstance(search_after, builtins.list) or len(search_after) != 2:
                    raise ValueError("cursor shape")
            except (ValueError, UnicodeDecodeError) as exc:
                raise BadRequest("cursor is not one this API returned") from exc
        hits = self._search(queries.list_body(tenant, user_id, filters, limit, search_after, order), "list")
        page = hits[:limit]
        next_cursor = None
        if len(hits) > limit and page:
            next_cursor = base64.urlsafe_b64encode(json.dumps(page[-1]["sort"]).encode()).decode()
        return [mapping.from_source(h["_source"]) for h in page], next_cursor

    def users(
        self, tenant: str, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[UserSummary], str | None]:
        self._ensure()
        response = self._call(
            "users", self.client.search, index=self.alias, body=queries.users_body(tenant, limit, cursor)
        )
        try:
            buckets = response["aggregations"]["users"]["buckets"]
            page = [_user_summary(b) for b in buckets[:limit]]
        except (KeyError, TypeError, ValueError) as exc:
            raise DependencyFailed("OpenSearch returned a users answer without its aggregation") from exc
        return page, (page[-1].user_id if len(buckets) > limit else None)

    # ----------------------------------------------------------------- search
    def bm25_search(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        body = queries.bm25_body(tenant, user_id, query, k, filters)
        return _bm25_hits(self._search(body, "bm25 search")) if body else []

    def vector_search(
        self, tenant: str, user_id: str, query_coarse: np.ndarray, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        body = queries.knn_body(tenant, user_id, _vector(query_coarse), k, filters)
        return _knn_hits(self._search(body, "k-NN search"))

    def hybrid_candidates(
        self,
        tenant: str,
        user_id: str,
        query: str,
        query_coarse: np.ndarray,
        k_bm25: int,
        k_vector: int,
        filters: MemoryFilters,
    ) -> tuple[builtins.list[ScoredId], builtins.list[ScoredId]]:
        """(BM25 hits, coarse k-NN hits) from ONE ``_msearch`` round trip."""
        self._ensure()
        bm25 = queries.bm25_body(tenant, user_id, query, k_bm25, filters)
        knn = queries.knn_body(tenant, user_id, _vector(query_coarse), k_vector, filters)
        bodies = [knn] if bm25 is None else [bm25, knn]
        response = self._call("msearch", self.client.msearch, body=queries.msearch_lines(self.alias, *bodies))
        answers = response.get("responses") if isinstance(response, dict) else None
        if not isinstance(answers, builtins.list) or len(answers) != len(bodies):
            raise DependencyFailed("OpenSearch msearch returned a malformed answer")
        for answer in answers:
            if "error" in answer:
                raise DependencyFailed(f"OpenSearch search failed: {answer['error']}")
        knn_hits = _knn_hits(_hits(answers[-1]))
        return (_bm25_hits(_hits(answers[0])) if bm25 is not None else []), knn_hits

    def close(self) -> None:
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None


def _vector(query: np.ndarray) -> builtins.list[float]:
    return [float(x) for x in np.asarray(query, dtype=np.float32)]


def _user_summary(bucket: dict[str, Any]) -> UserSummary:
    tiers = {t["key"]: int(t["doc_count"]) for t in bucket["live"]["tiers"]["buckets"]}
    newest = bucket["last_write"].get("value")  # epoch milliseconds; null without a created_at
    return UserSummary(
        user_id=str(bucket["key"]["user_id"]),
        stm=tiers.get("stm", 0),
        ltm=tiers.get("ltm", 0),
        last_write=datetime.fromtimestamp(newest / 1000, UTC) if newest is not None else None,
    )


def _hits(response: Any) -> builtins.list[dict[str, Any]]:
    hits = response.get("hits", {}).get("hits") if isinstance(response, dict) else None
    if not isinstance(hits, builtins.list):
        raise DependencyFailed("OpenSearch returned a search answer without hits")
    return hits


def _first_per_id(hits: builtins.list[dict[str, Any]]) -> builtins.list[dict[str, Any]]:
    """Hits come best first; a serverless collection may briefly hold two copies of one memory."""
    seen: set[str] = set()
    out = []
    for h in hits:
        if h["_source"]["memory_id"] not in seen:
            seen.add(h["_source"]["memory_id"])
            out.append(h)
    return out


def _bm25_hits(hits: builtins.list[dict[str, Any]]) -> builtins.list[ScoredId]:
    return [ScoredId(id=h["_source"]["memory_id"], score=float(h["_score"])) for h in _first_per_id(hits)]


def _knn_hits(hits: builtins.list[dict[str, Any]]) -> builtins.list[ScoredId]:
    # cosinesimil scores are (1 + cos) / 2; report the cosine like every other backend.
    return [
        ScoredId(id=h["_source"]["memory_id"], score=2.0 * float(h["_score"]) - 1.0)
        for h in _first_per_id(hits)
    ]
