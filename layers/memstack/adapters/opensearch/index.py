"""The OpenSearch index behind the store and how we talk to it: client, retries, bulk, lifecycle.

Documents live in ``<alias>-v<N>`` indices created from one index template
(``mapping.index_template``) and are read and written through ``<alias>``.
``ensure_index`` runs once per container (idempotent: a concurrent creation
is fine); ``reindex`` copies into ``-v<N+1>`` and swaps the alias in one
``_aliases`` call, so the mapping can change without downtime.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable
from typing import Any

from memstack.adapters.opensearch import mapping
from memstack.adapters.opensearch.client import build_client, with_retries
from memstack.errors import DependencyFailed, SettingsError

Op = tuple[dict[str, Any], dict[str, Any] | None]


def status_of(exc: Exception) -> Any:
    return getattr(exc, "status_code", None)


class OpenSearchIndex:
    """One aliased index: the lazily created client, bounded retries, bulk, create/reindex/drop."""

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
        self._sleep = sleep
        self._ready = not auto_create

    @property
    def client(self) -> Any:
        """The OpenSearch client, created on first use and kept for the container's life."""
        if self._client is None:
            assert self.endpoint is not None
            self._client = build_client(self.endpoint, service=self.service, region=self.region)
        return self._client

    def _call(self, what: str, fn: Callable[..., Any], *, expect: tuple[int, ...] = (), **kwargs: Any) -> Any:
        """One request with bounded retries; an HTTP error not in ``expect`` becomes ``DependencyFailed``."""
        from opensearchpy.exceptions import TransportError

        try:
            return with_retries(lambda: fn(**kwargs), what=what, attempts=self.attempts, sleep=self._sleep)
        except TransportError as exc:
            if status_of(exc) in expect:
                raise
            raise DependencyFailed(f"OpenSearch {what} failed: {exc}") from exc

    # ------------------------------------------------------------------ index
    def template_body(self) -> dict[str, Any]:
        return mapping.index_template(
            self.alias,
            embedding_dim=self.embedding_dim,
            coarse_dim=self.coarse_dim,
            engine=self.engine,
            m=self.m,
            ef_construction=self.ef_construction,
        )

    def ensure_index(self) -> None:
        """Put the index template; create ``<alias>-v1`` behind the alias, or add new fields to its index."""
        self._call(
            "put index template",
            self.client.indices.put_index_template,
            name=self.alias,
            body=self.template_body(),
        )
        if self._call("check alias", self.client.indices.exists_alias, name=self.alias):
            # An index made from an older template: fields added since are added to it
            # (adding a field is allowed; a strict mapping would reject documents with it).
            self._call(
                "add new fields",
                self.client.indices.put_mapping,
                index=self.alias,
                body=mapping.added_fields(),
            )
        else:
            try:
                self._call(
                    "create index",
                    self.client.indices.create,
                    index=mapping.index_name(self.alias, 1),
                    body={"aliases": {self.alias: {}}},
                    expect=(400,),
                )
            except Exception as exc:
                # Another container created it first: fine, that is the index we wanted.
                if "resource_already_exists" not in str(exc):
                    raise DependencyFailed(f"OpenSearch create index failed: {exc}") from exc
        self._ready = True

    def _ensure(self) -> None:
        if not self._ready:
            self.ensure_index()

    def reindex(self) -> str:
        """Copy everything into a new ``-v<N+1>`` index (current template) and move the alias to it."""
        self._ensure()
        current = sorted(self._call("get alias", self.client.indices.get_alias, name=self.alias))
        old = current[-1]
        new = mapping.index_name(self.alias, int(old.rsplit("-v", 1)[1]) + 1)
        self._call(
            "put index template",
            self.client.indices.put_index_template,
            name=self.alias,
            body=self.template_body(),
        )
        self._call("create index", self.client.indices.create, index=new, body={})
        self._call(
            "reindex",
            self.client.reindex,
            body={"source": {"index": old}, "dest": {"index": new}},
            wait_for_completion=True,
            refresh=True,
        )
        actions = [{"remove": {"index": i, "alias": self.alias}} for i in current]
        self._call(
            "swap alias",
            self.client.indices.update_aliases,
            body={"actions": [*actions, {"add": {"index": new, "alias": self.alias}}]},
        )
        return new

    def drop_index(self) -> None:
        """Delete every index of this alias and its template (tests and teardown only)."""
        self._call("delete index", self.client.indices.delete, index=f"{self.alias}-v*")
        self._call("delete template", self.client.indices.delete_index_template, name=self.alias)
        self._ready = False

    # ----------------------------------------------------------------- writes
    def _bulk(self, ops: builtins.list[Op]) -> builtins.list[dict[str, Any]]:
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
            response = self._call("bulk", self.client.bulk, body=body, **refresh)
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
                self._sleep(min(2.0, 0.1 * 2**attempt))
        return results
