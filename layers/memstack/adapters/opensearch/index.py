"""The OpenSearch index behind the store and how requests reach it: client, retries, bulk, search.

What an index is named, how it is created and how documents are written differ
between a managed domain and a serverless collection: that is the flavour's
(``managed.ManagedDocuments``, ``serverless.ServerlessDocuments``). This module
is only the wire they share: one client created lazily, bounded retries,
bulk with 429s re-sent, and searches whose answers are checked.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable
from typing import Any

from memstack.adapters.opensearch import mapping
from memstack.adapters.opensearch.client import build_client, with_retries
from memstack.errors import DependencyFailed, SettingsError

Op = tuple[dict[str, Any], dict[str, Any] | None]


def status_of(exc: Exception) -> Any:
    return getattr(exc, "status_code", None)


class OpenSearchIndex:
    """One index (or alias) on one client: its name and vector mapping, retries, bulk, search.

    ``refresh`` is the bulk refresh policy (``None``: no refresh parameter at all, as a serverless
    collection requires); ``ready`` says whether the flavour has made sure the index exists.
    """

    def __init__(
        self,
        client: Any | None = None,
        *,
        alias: str,
        embedding_dim: int,
        coarse_dim: int,
        engine: str = "faiss",
        m: int = 16,
        ef_construction: int = 128,
        refresh: str | None = "wait_for",
        endpoint: str | None = None,
        service: str | None = None,
        region: str | None = None,
        attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
        auto_create: bool = True,
    ) -> None:
        if client is None and not endpoint:
            raise SettingsError("MEMSTACK_OPENSEARCH_ENDPOINT: the opensearch store needs an endpoint")
        self._client = client
        self._owns_client = client is None
        self.alias = alias
        self.embedding_dim = embedding_dim
        self.coarse_dim = coarse_dim
        self.engine = engine
        self.m = m
        self.ef_construction = ef_construction
        self.refresh = refresh
        self.endpoint = endpoint
        self.service = service
        self.region = region
        self.attempts = attempts
        self.sleep = sleep
        self.ready = not auto_create

    @property
    def client(self) -> Any:
        """The OpenSearch client, created on first use and kept for the container's life."""
        if self._client is None:
            assert self.endpoint is not None
            self._client = build_client(self.endpoint, service=self.service, region=self.region)
        return self._client

    def call(self, what: str, fn: Callable[..., Any], *, expect: tuple[int, ...] = (), **kwargs: Any) -> Any:
        """One request with bounded retries; an HTTP error not in ``expect`` becomes ``DependencyFailed``."""
        from opensearchpy.exceptions import TransportError

        try:
            return with_retries(lambda: fn(**kwargs), what=what, attempts=self.attempts, sleep=self.sleep)
        except TransportError as exc:
            if status_of(exc) in expect:
                raise
            raise DependencyFailed(f"OpenSearch {what} failed: {exc}") from exc

    # ------------------------------------------------------------------ index
    def create(self, index: str, body: dict[str, Any]) -> None:
        """Create ``index``; one another container created first is fine (that is the index wanted)."""
        try:
            self.call("create index", self.client.indices.create, index=index, body=body, expect=(400,))
        except Exception as exc:
            if "resource_already_exists" not in str(exc):
                raise DependencyFailed(f"OpenSearch create index failed: {exc}") from exc

    def add_new_fields(self) -> None:
        """Add the fields the mapping gained since the index was made (adding a field is allowed;
        a strict mapping would reject documents that carry it)."""
        self.call(
            "add new fields", self.client.indices.put_mapping, index=self.alias, body=mapping.added_fields()
        )

    # ----------------------------------------------------------------- writes
    def bulk(self, ops: builtins.list[Op]) -> builtins.list[dict[str, Any]]:
        """Send ``ops``; items rejected with 429 are sent again (bounded). One result per op."""
        results: builtins.list[dict[str, Any]] = [{} for _ in ops]
        pending = list(range(len(ops)))
        for attempt in range(self.attempts):
            body: builtins.list[dict[str, Any]] = []
            for i in pending:
                body.append(ops[i][0])
                if ops[i][1] is not None:
                    body.append(ops[i][1])  # type: ignore[arg-type]
            # None: no refresh parameter at all (serverless collections reject it).
            refresh: dict[str, Any] = {} if self.refresh is None else {"refresh": self.refresh}
            response = self.call("bulk", self.client.bulk, body=body, **refresh)
            items = response.get("items") if isinstance(response, dict) else None
            if not isinstance(items, list) or len(items) != len(pending):
                raise DependencyFailed("OpenSearch bulk returned a malformed answer")
            rejected = []
            for i, item in zip(pending, items, strict=True):
                result = next(iter(item.values()))
                results[i] = result
                if result.get("status") == 429:
                    rejected.append(i)
            if not rejected:
                break
            pending = rejected
            if attempt < self.attempts - 1:
                self.sleep(min(2.0, 0.1 * 2**attempt))
        return results

    def delete_ops(self, doc_ids: Iterable[str]) -> builtins.list[Op]:
        """Bulk deletes of these documents (by ``_id``)."""
        return [({"delete": {"_index": self.alias, "_id": i}}, None) for i in doc_ids]

    # ----------------------------------------------------------------- reads
    def search(self, body: dict[str, Any], what: str = "search") -> builtins.list[dict[str, Any]]:
        """The hits of one search of the index (``DependencyFailed`` for an answer without hits)."""
        return hits_of(self.call(what, self.client.search, index=self.alias, body=body))

    def close(self) -> None:
        """Close the client this index created (one passed in belongs to the caller)."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None


def hits_of(response: Any) -> builtins.list[dict[str, Any]]:
    hits = response.get("hits", {}).get("hits") if isinstance(response, dict) else None
    if not isinstance(hits, builtins.list):
        raise DependencyFailed("OpenSearch returned a search answer without hits")
    return hits
