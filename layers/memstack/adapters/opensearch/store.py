"""The ``opensearch`` memory store (medium, large and serverless tiers): BM25 + k-NN in one index.

One store, two flavours of documents (``documents.Documents``): a managed domain
(``managed.ManagedDocuments``) or a serverless vector-search collection
(``serverless.ServerlessDocuments``). What they share lives here:

- Search: ``hybrid_candidates_with_counts`` sends the BM25 query, the filtered
  k-NN query and the term-count search of a search in one ``_msearch`` (the
  retrieval's stage 2 asks it: ``domain.retrieval.hybrid``);
  ``bm25_search``/``vector_search``/``term_counts`` are the same queries sent
  alone (``queries``), as dense feedback and the BM25 feedback query send theirs.
  Fusion and every later stage stay in the shared pipeline.
- Listing, users, successors and lookups by source: searches whose hits the
  flavour collapses to one record per memory.
- Erase is final (``domain.erasure``): a write of work that began before the
  user's last erasure is refused. OpenSearch has no transactions, so the
  flavour's erasure record is read before the write and again after it; a
  write that lands while an erase runs is found by that second read and
  taken back (by the undo operations the flavour's write returned).
- Retries: 429/5xx/connection errors, bounded, exponential backoff with
  jitter (``client.with_retries``), including items a bulk rejected with 429.

Writes, reads by id, erase and the index lifecycle are the flavour's.
"""

from __future__ import annotations

import base64
import builtins
import json
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memstack.adapters.opensearch import mapping, queries
from memstack.adapters.opensearch.documents import Documents
from memstack.adapters.opensearch.index import Op, OpenSearchIndex, hits_of
from memstack.adapters.opensearch.managed import ManagedDocuments
from memstack.adapters.opensearch.serverless import ServerlessDocuments
from memstack.domain.erasure import Erased, Fence, refuse_if_erased
from memstack.errors import BadRequest, Conflict, DependencyFailed
from memstack.models import ListOrder, MemoryFilters, MemoryRecord, ScoredId, UserSummary
from memstack.ports.stm import ErasureLog
from memstack.ports.store import TermCounts
from memstack.ports.tenant_config import TenantConfigStore
from memstack.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.ports.stm import ShortTermStore


class OpenSearchMemoryStore:
    """The ``MemoryStore`` port on an OpenSearch index, with the ``documents`` of its flavour."""

    def __init__(self, index: OpenSearchIndex, documents: Documents) -> None:
        self.index = index
        self.documents = documents

    @property
    def client(self) -> Any:
        """The index's client (created on first use)."""
        return self.index.client

    @classmethod
    def managed(cls, client: Any | None = None, **options: Any) -> OpenSearchMemoryStore:
        """A store on a managed domain; ``options`` are ``OpenSearchIndex``'s (alias, dimensions...)."""
        index = OpenSearchIndex(client, **options)
        return cls(index, ManagedDocuments(index))

    @classmethod
    def serverless(
        cls,
        client: Any | None = None,
        *,
        visibility_seconds: float = 15.0,
        clock: Callable[[], int] = time.time_ns,
        erasure_log: ErasureLog | None = None,
        **options: Any,
    ) -> OpenSearchMemoryStore:
        """A store on a serverless collection (no refresh parameter); ``erasure_log`` fences its writes."""
        index = OpenSearchIndex(client, **{**options, "refresh": None})
        documents = ServerlessDocuments(
            index, visibility_seconds=visibility_seconds, clock=clock, erasure_log=erasure_log
        )
        return cls(index, documents)

    @classmethod
    def from_settings(
        cls, settings: Settings, client: Any | None = None, erasure_log: ErasureLog | None = None
    ) -> OpenSearchMemoryStore:
        """The store for the configured engine: a managed domain (``es``) or a serverless collection.

        ``erasure_log``: what fences a serverless collection's writes (it has no consistent read).
        """
        os_ = settings.opensearch
        options: dict[str, Any] = {
            "alias": os_.index,
            "embedding_dim": settings.embedding.embedding_dim,
            "coarse_dim": settings.embedding.coarse_dim,
            "engine": os_.engine,
            "m": os_.hnsw_m,
            "ef_construction": os_.hnsw_ef_construction,
            "endpoint": os_.endpoint,
            "service": os_.service,
            "region": settings.aws.aws_region,
        }
        if os_.service == "aoss":
            return cls.serverless(
                client, visibility_seconds=os_.visibility_seconds, erasure_log=erasure_log, **options
            )
        return cls.managed(client, refresh=os_.refresh, **options)

    # ------------------------------------------------------------------ index
    def ensure_index(self) -> None:
        """Make sure the index exists with the current mapping (idempotent)."""
        self.documents.ensure_index()

    def _ensure(self) -> None:
        if not self.index.ready:
            self.documents.ensure_index()

    def reindex(self) -> str:
        """Move to a new index version (a managed domain; a collection refuses, saying how instead)."""
        return self.documents.reindex()

    def drop_index(self) -> None:
        """Delete the index (tests and teardown only)."""
        self.documents.drop_index()

    # ------------------------------------------------------------ erase fence
    def _refuse_if_erased(self, owners: Iterable[tuple[str, str]], fence: Fence | None) -> None:
        """``Erased`` when the work writing (``fence``) began before an erasure of one of ``owners``."""
        if fence is None:
            return
        for tenant, user_id in sorted(set(owners)):
            refuse_if_erased(fence, self.documents.erased_at(tenant, user_id))

    def _fenced_write(
        self,
        records: builtins.list[MemoryRecord],
        write: Callable[[], builtins.list[Op]],
        fence: Fence | None,
    ) -> None:
        """Run ``write()`` (it returns the ops that undo it) between two reads of the erasure records.

        An erasure the second read finds, newer than the work, takes the write back and raises ``Erased``.
        """
        owners = [(r.tenant, r.user_id) for r in records]
        self._refuse_if_erased(owners, fence)
        undo = write()
        try:
            self._refuse_if_erased(owners, fence)
        except Erased:
            if undo:
                self.index.bulk(undo)
            raise

    # ----------------------------------------------------------------- writes
    def put(self, records: builtins.list[MemoryRecord], *, fence: Fence | None = None) -> None:
        if not records:
            return
        keys = [(r.tenant, r.user_id, r.id) for r in records]
        if len(set(keys)) != len(keys):
            raise Conflict("the same memory id appears twice in one write")
        self._ensure()
        self._fenced_write(records, lambda: self.documents.put(records), fence)

    def supersede(
        self, tenant: str, user_id: str, old_id: str, new: MemoryRecord, *, fence: Fence | None = None
    ) -> None:
        if (new.tenant, new.user_id) != (tenant, user_id):
            raise BadRequest("a new version must belong to the same tenant and user")
        self._ensure()
        self._fenced_write([new], lambda: self.documents.supersede(tenant, user_id, old_id, new), fence)

    def mark(self, tenant: str, user_id: str, ids: builtins.list[str], **fields: object) -> int:
        if not ids:
            return 0
        self._ensure()
        return self.documents.mark(tenant, user_id, ids, fields)

    def link_conflicts(self, tenant: str, user_id: str, links: dict[str, builtins.list[str]]) -> int:
        if not links:
            return 0
        self._ensure()
        return self.documents.link_conflicts(tenant, user_id, links)

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        self._ensure()
        # The erasure record first: from now on a write of work begun before it is refused or taken back.
        self.documents.record_erasure(tenant, user_id)
        return {"memories": self.documents.erase(tenant, user_id)}

    # ------------------------------------------------------------------ reads
    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        self._ensure()
        source = self.documents.source(tenant, user_id, memory_id)
        return mapping.from_source(source) if source else None

    def get_many(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, MemoryRecord]:
        if not ids:
            return {}
        self._ensure()
        sources = self.documents.sources(tenant, user_id, ids, embedding=False)
        return {i: mapping.from_source(s) for i, s in sources.items()}

    def embeddings(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        self._ensure()
        sources = self.documents.sources(tenant, user_id, ids, embedding=True)
        return {
            i: np.asarray(s["embedding_full"], dtype=np.float32)
            for i, s in sources.items()
            if s.get("embedding_full") is not None
        }

    def _search(self, body: dict[str, Any], what: str = "search") -> builtins.list[dict[str, Any]]:
        self._ensure()
        return self.index.search(body, what)

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        window = self.documents.successor_window
        found = self.documents.collapse(
            self._search(queries.term_body(tenant, user_id, "replaces_id", memory_id, window))
        )
        return found[0] if found else None

    def find_by_source(self, tenant: str, user_id: str, source_id: str) -> builtins.list[MemoryRecord]:
        return self.documents.collapse(
            self._search(queries.term_body(tenant, user_id, "source_ids", source_id, 1000))
        )

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
        # A collection may briefly show two copies of one memory: the flavour keeps one.
        return self.documents.collapse(page), next_cursor

    def tenants(self) -> builtins.list[str]:
        self._ensure()
        found: list[str] = []
        after: str | None = None
        while True:
            response = self.index.call(
                "tenants", self.client.search, index=self.index.alias, body=queries.tenants_body(after)
            )
            try:
                aggregation = response["aggregations"]["tenants"]
                found += [str(b["key"]["tenant"]) for b in aggregation["buckets"]]
            except (KeyError, TypeError) as exc:
                raise DependencyFailed(
                    "OpenSearch returned a tenants answer without its aggregation"
                ) from exc
            after = (aggregation.get("after_key") or {}).get("tenant") if aggregation["buckets"] else None
            if after is None:
                return found

    def users(
        self, tenant: str, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[UserSummary], str | None]:
        self._ensure()
        response = self.index.call(
            "users",
            self.client.search,
            index=self.index.alias,
            body=queries.users_body(tenant, limit, cursor),
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

    def term_counts(self, tenant: str, user_id: str, query: str) -> TermCounts:
        """Document frequencies of the query's words among the user's current documents (one search)."""
        self._ensure()
        body, terms = queries.term_counts_body(tenant, user_id, query)
        response = self.index.call("term counts", self.client.search, index=self.index.alias, body=body)
        return _term_counts(response, terms)

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
        bm25, knn, _ = self._candidates(tenant, user_id, query, query_coarse, k_bm25, k_vector, filters)
        return bm25, knn

    def hybrid_candidates_with_counts(
        self,
        tenant: str,
        user_id: str,
        query: str,
        query_coarse: np.ndarray,
        k_bm25: int,
        k_vector: int,
        filters: MemoryFilters,
    ) -> tuple[builtins.list[ScoredId], builtins.list[ScoredId], TermCounts]:
        """``hybrid_candidates`` and ``term_counts``: their searches in ONE ``_msearch``."""
        body, terms = queries.term_counts_body(tenant, user_id, query)
        bm25, knn, (counted,) = self._candidates(
            tenant, user_id, query, query_coarse, k_bm25, k_vector, filters, body
        )
        return bm25, knn, _term_counts(counted, terms)

    def _candidates(
        self,
        tenant: str,
        user_id: str,
        query: str,
        query_coarse: np.ndarray,
        k_bm25: int,
        k_vector: int,
        filters: MemoryFilters,
        *more: dict[str, Any],
    ) -> tuple[builtins.list[ScoredId], builtins.list[ScoredId], builtins.list[dict[str, Any]]]:
        """(BM25 hits, k-NN hits, the answers of the ``more`` searches) from ONE ``_msearch``.

        A query without words sends no BM25 search (its hits are none, as ``bm25_search``'s).
        """
        self._ensure()
        bm25 = queries.bm25_body(tenant, user_id, query, k_bm25, filters)
        knn = queries.knn_body(tenant, user_id, _vector(query_coarse), k_vector, filters)
        bodies = [*([] if bm25 is None else [bm25]), knn, *more]
        response = self.index.call(
            "msearch", self.client.msearch, body=queries.msearch_lines(self.index.alias, *bodies)
        )
        answers = response.get("responses") if isinstance(response, dict) else None
        if not isinstance(answers, builtins.list) or len(answers) != len(bodies):
            raise DependencyFailed("OpenSearch msearch returned a malformed answer")
        for answer in answers:
            if "error" in answer:
                raise DependencyFailed(f"OpenSearch search failed: {answer['error']}")
        hits, rest = answers[: len(bodies) - len(more)], answers[len(bodies) - len(more) :]
        bm25_hits = _bm25_hits(hits_of(hits[0])) if bm25 is not None else []
        return bm25_hits, _knn_hits(hits_of(hits[-1])), rest

    def tenant_config_store(self) -> TenantConfigStore:
        """Tenants' configurations in ``<alias>-config`` on the same client (``ports.tenant_config``)."""
        return self.documents.tenant_config_store()

    def close(self) -> None:
        self.index.close()


def _vector(query: np.ndarray) -> builtins.list[float]:
    return [float(x) for x in np.asarray(query, dtype=np.float32)]


def _term_counts(response: Any, terms: builtins.list[str]) -> TermCounts:
    """A term count search's answer (``queries.term_counts_body``) as ``TermCounts``."""
    try:
        docs = int(response["hits"]["total"]["value"])
        aggs = response.get("aggregations", {}) if terms else {}
        df = {term: int(aggs[f"t{i}"]["doc_count"]) for i, term in enumerate(terms)}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DependencyFailed("OpenSearch returned a term count answer without its counts") from exc
    return TermCounts(docs, df)


def _user_summary(bucket: dict[str, Any]) -> UserSummary:
    tiers = {t["key"]: int(t["doc_count"]) for t in bucket["live"]["tiers"]["buckets"]}
    newest = bucket["last_write"].get("value")  # epoch milliseconds; null without a created_at
    return UserSummary(
        user_id=str(bucket["key"]["user_id"]),
        stm=tiers.get("stm", 0),
        ltm=tiers.get("ltm", 0),
        last_write=datetime.fromtimestamp(newest / 1000, UTC) if newest is not None else None,
    )


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


def build(
    settings: Settings, clients: Mapping[str, Any], stm: ShortTermStore | None
) -> OpenSearchMemoryStore:
    """``MEMSTACK_STORE_BACKEND=opensearch``; ``clients["opensearch"]`` when given (``factory.STORES``).

    A serverless collection's writes are fenced by the STM's erasure log (it has no consistent read).
    """
    log = stm if isinstance(stm, ErasureLog) else None
    return OpenSearchMemoryStore.from_settings(settings, clients.get("opensearch"), erasure_log=log)
