"""Documents on an OpenSearch Serverless VECTORSEARCH collection (service ``aoss``, the serverless tier).

A vector-search collection differs from a managed domain in ways the store
must respect (AWS: "Supported operations and plugins in Amazon OpenSearch
Serverless", "Choosing a collection type"):

- Documents get ids the collection assigns: ``PUT <index>/_doc/<id>``,
  ``_create/<id>`` and ``_update/<id>`` are for SEARCH collections only. So
  every document carries ``doc_id`` (``mapping.doc_id``: tenant, user,
  memory) and every read by id is a ``term`` query on it; writes are bulk
  ``index`` actions without ``_id``; the assigned ``_id`` is used only to
  delete a copy (``DELETE <index>/_doc/<id>`` and bulk ``delete`` are allowed).
- No ``refresh`` parameter and no ``_refresh``: a write becomes searchable
  when the collection refreshes on its own (seconds). No ``_delete_by_query``,
  ``_update_by_query`` or ``_reindex`` either.

How supersede and erase stay correct without refresh or in-place updates:

- Nothing is updated in place. Changing a document (retiring a version,
  marking metadata) writes a new copy with a higher ``revision`` and deletes
  the old copy by its ``_id`` in the same bulk request. Reads group copies by
  ``doc_id`` and take the highest revision, so a copy whose delete is not
  visible yet, or a write retried before the first became visible, never
  shows as a second memory; reads delete the stale copies they see (repair).
- A new version and its retired predecessor are written in one bulk; when
  exactly one half fails, the other is deleted by the ``_id`` the bulk
  answer gave it, and ``Conflict`` or ``DependencyFailed`` is raised, as on
  a domain. What a collection cannot give is the domain's compare-and-set
  (``if_seq_no``): two concurrent updates of the same version can both
  land (docs/operations.md, "OpenSearch Serverless").
- Erase searches the user's documents and deletes them by ``_id`` until a
  search finds none, then waits ``visibility_seconds`` (the collection's
  refresh) and searches again, so writes that were not yet visible when the
  erase began are found and deleted too.
- Erase is final with an ``erasure_log`` (the DynamoDB STM's erasure
  marker, read consistently; the factory wires it): a collection has no
  realtime read of its own, so its own marker could not fence. A write of
  declared work reads the log before and after it writes and takes back
  (by the ``_id`` the bulk assigned) what it wrote when an erasure newer
  than the work appears. The service erases the STM (writing the marker)
  before the store, so a write whose second read saw no marker landed
  before the store's erase began, and its second look (one refresh later)
  finds it.

Index lifecycle: one index named ``<alias>`` created with its mappings
(``PUT <index>``, no template or alias needed); ``reindex`` is refused
(no ``_reindex`` on serverless: docs/operations.md has the export/import way).
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable
from typing import Any

from memstack.adapters.opensearch import mapping, queries
from memstack.adapters.opensearch.documents import OK, write_failure
from memstack.adapters.opensearch.index import Op, OpenSearchIndex
from memstack.errors import BadRequest, Conflict, DependencyFailed
from memstack.models import MemoryRecord
from memstack.ports.stm import ErasureLog
from memstack.ports.tenant_config import TenantConfigStore

#: largest page of one user's documents read at once (erase, lookups by id)
PAGE = 1000
#: bulk ``index`` without ``_id``: the collection assigns one
Copy = tuple[str, dict[str, Any]]  # (assigned _id, _source)


class ServerlessDocuments:
    """``Documents`` on a VECTORSEARCH collection: ``doc_id`` field, assigned ids, revisions, no refresh."""

    #: a memory's successor may show as a few copies until their deletes are visible
    successor_window = 10

    def __init__(
        self,
        index: OpenSearchIndex,
        *,
        visibility_seconds: float = 15.0,
        clock: Callable[[], int] = time.time_ns,
        erasure_log: ErasureLog | None = None,
    ) -> None:
        if index.refresh is not None:
            raise ValueError(
                "a serverless collection refuses the refresh parameter: build its index with None"
            )
        self.index = index
        self.visibility_seconds = visibility_seconds
        self._clock = clock
        self.erasure_log = erasure_log

    @property
    def alias(self) -> str:
        return self.index.alias

    @property
    def client(self) -> Any:
        return self.index.client

    # ------------------------------------------------------------ erase fence
    def erased_at(self, tenant: str, user_id: str) -> float | None:
        return self.erasure_log.erased_at(tenant, user_id) if self.erasure_log is not None else None

    def record_erasure(self, tenant: str, user_id: str) -> None:
        """The erasure log's owner (the STM) records the erasure, before the store is erased."""

    # ------------------------------------------------------------------ index
    def ensure_index(self) -> None:
        """``HEAD <index>``; if missing, ``PUT <index>`` with the mappings (a concurrent creation is fine).

        An index that exists gets the fields added to the mapping since it was made.
        """
        ix = self.index
        if ix.call("check index", self.client.indices.exists, index=self.alias):
            ix.add_new_fields()
        else:
            ix.create(
                self.alias,
                mapping.index_body(ix.embedding_dim, ix.coarse_dim, ix.engine, ix.m, ix.ef_construction),
            )
        self.index.ready = True

    def reindex(self) -> str:
        raise BadRequest(
            "OpenSearch Serverless has no _reindex: create the new index and copy the memories into it "
            "(docs/operations.md, 'Upgrading')"
        )

    def drop_index(self) -> None:
        self.index.call("delete index", self.client.indices.delete, index=self.alias)
        self.index.ready = False

    def tenant_config_store(self) -> TenantConfigStore:
        """Tenants' configurations in ``<alias>-config``, as copies with versions (no ``_id`` writes)."""
        from memstack.adapters.opensearch.tenant_config import ServerlessTenantConfigStore

        return ServerlessTenantConfigStore(self.index)

    # ------------------------------------------------------------ documents
    def _revision(self, after: int = 0) -> int:
        return max(self._clock(), after + 1)

    def _doc(self, record: MemoryRecord, revision: int) -> dict[str, Any]:
        did = mapping.doc_id(record.tenant, record.user_id, record.id)
        return {**mapping.to_doc(record), "doc_id": did, "revision": revision}

    def _copies(
        self, tenant: str, user_id: str, ids: builtins.list[str], *, vectors: bool
    ) -> dict[str, builtins.list[Copy]]:
        """Every visible copy of each memory, newest revision first, keyed by memory id."""
        if not ids:
            return {}
        dids = {mapping.doc_id(tenant, user_id, i): i for i in dict.fromkeys(ids)}
        body = queries.doc_ids_body(tenant, user_id, list(dids), PAGE, vectors=vectors)
        found: dict[str, builtins.list[Copy]] = {}
        for hit in self.index.search(body, "get"):
            memory_id = dids.get(hit["_source"].get("doc_id"))
            if memory_id is not None:
                found.setdefault(memory_id, []).append((hit["_id"], hit["_source"]))
        for copies in found.values():
            copies.sort(key=lambda c: -int(c[1].get("revision", 0)))
        return found

    def _latest(
        self, tenant: str, user_id: str, ids: builtins.list[str], *, vectors: bool = False
    ) -> dict[str, Copy]:
        """The newest copy of each memory; older copies seen on the way are deleted (read repair)."""
        found = self._copies(tenant, user_id, ids, vectors=vectors)
        stale = [copy_id for copies in found.values() for copy_id, _ in copies[1:]]
        if stale:
            self.index.bulk(self.index.delete_ops(stale))
        return {memory_id: copies[0] for memory_id, copies in found.items()}

    def _write(
        self, sources: builtins.list[dict[str, Any]], retire: builtins.list[str]
    ) -> builtins.list[dict]:
        """Index ``sources`` (the collection assigns ids) and delete the copies ``retire`` in one bulk."""
        ops: builtins.list[Op] = [({"index": {"_index": self.alias}}, s) for s in sources]
        return self.index.bulk(ops + self.index.delete_ops(retire))

    def _deletes(self, results: Iterable[dict[str, Any]]) -> builtins.list[Op]:
        """Bulk deletes of the copies ``results`` say were written (by the ``_id`` the collection gave)."""
        return self.index.delete_ops(r["_id"] for r in results if r.get("status") in OK and r.get("_id"))

    def _undo(self, results: Iterable[dict[str, Any]]) -> None:
        """Delete the copies a partly failed bulk did write (by the ids it assigned them)."""
        ops = self._deletes(results)
        if ops:
            self.index.bulk(ops)

    # ---------------------------------------------------------------- writes
    def put(self, records: builtins.list[MemoryRecord]) -> builtins.list[Op]:
        for tenant, user_id in {(r.tenant, r.user_id) for r in records}:
            mine = [r.id for r in records if (r.tenant, r.user_id) == (tenant, user_id)]
            taken = self._copies(tenant, user_id, mine, vectors=False)
            if taken:
                raise Conflict(f"memory {next(iter(taken))} already exists")
        revision = self._revision()
        results = self._write([self._doc(r, revision) for r in records], [])
        failed = [res for res in results if res.get("status") not in OK]
        if failed:
            self._undo(results)  # all or nothing, as the other backends
            raise write_failure(failed[0], "a memory in this write already exists")
        return self._deletes(results)

    def supersede(self, tenant: str, user_id: str, old_id: str, new: MemoryRecord) -> builtins.list[Op]:
        old = self._latest(tenant, user_id, [old_id], vectors=True).get(old_id)
        if old is None or not old[1].get("is_current") or old[1].get("tenant") != tenant:
            raise Conflict(f"memory {old_id} is not the current version")
        if self._copies(tenant, user_id, [new.id], vectors=False):
            raise Conflict(f"memory {new.id} already exists")
        copy_id, source = old
        revision = self._revision(int(source.get("revision", 0)))
        retired = {
            **source,
            "is_current": False,
            "superseded_at": new.created_at.isoformat(),
            "revision": revision,
        }
        results = self._write([retired, self._doc(new, revision)], [copy_id])
        retire_result, create_result = results[0], results[1]
        if retire_result.get("status") in OK and create_result.get("status") in OK:
            return self._deletes(results[:2])
        self._undo(results[:2])
        if retire_result.get("status") not in OK:
            raise write_failure(retire_result, f"memory {old_id} is not the current version")
        raise write_failure(create_result, f"memory {new.id} already exists")

    def mark(self, tenant: str, user_id: str, ids: builtins.list[str], fields: dict[str, object]) -> int:
        latest = self._latest(tenant, user_id, ids, vectors=True)
        sources, retire = [], []
        for copy_id, source in latest.values():
            metadata = dict(source.get("metadata") or {})
            if all(metadata.get(k) == v for k, v in fields.items()):
                continue
            revision = self._revision(int(source.get("revision", 0)))
            metadata.update(fields)
            sources.append(
                {**source, "metadata": metadata, **mapping.metadata_fields(metadata), "revision": revision}
            )
            retire.append(copy_id)
        if not sources:
            return 0
        results = self._write(sources, retire)
        return sum(1 for res in results[: len(sources)] if res.get("status") in OK)

    def link_conflicts(self, tenant: str, user_id: str, links: dict[str, builtins.list[str]]) -> int:
        # No in-place update here: a new revision of each document, the old copy retired (as mark).
        latest = self._latest(tenant, user_id, list(links), vectors=True)
        sources, retire = [], []
        for memory_id, (copy_id, source) in latest.items():
            have = list(source.get("conflicts_with") or [])
            new = list(dict.fromkeys([*have, *links[memory_id]]))
            if new == have:
                continue
            revision = self._revision(int(source.get("revision", 0)))
            sources.append({**source, "conflicts_with": new, "revision": revision})
            retire.append(copy_id)
        if not sources:
            return 0
        results = self._write(sources, retire)
        return sum(1 for res in results[: len(sources)] if res.get("status") in OK)

    def erase(self, tenant: str, user_id: str) -> int:
        """Delete by ``_id`` until nothing is found, then look again once the collection has refreshed."""
        deleted: set[str] = set()
        self._erase_visible(tenant, user_id, deleted)
        for _ in range(self.index.attempts):
            self.index.sleep(self.visibility_seconds)  # writes made just before the erase become visible
            if not self._erase_visible(tenant, user_id, deleted):
                break
        else:
            raise DependencyFailed("OpenSearch kept returning documents of the erased user; erase again")
        return len(deleted)

    def _owned_ids(self, tenant: str, user_id: str, deleted: set[str]) -> builtins.list[str]:
        hits = self.index.search(queries.owner_ids_body(tenant, user_id, PAGE), "erase search")
        return [h["_id"] for h in hits if h["_id"] not in deleted]

    def _erase_visible(self, tenant: str, user_id: str, deleted: set[str]) -> int:
        """Delete every copy the collection shows now; returns how many it deleted."""
        total = 0
        while ids := self._owned_ids(tenant, user_id, deleted):
            results = self.index.bulk(self.index.delete_ops(ids))
            failed = [r for r in results if r.get("status") not in (*OK, 404)]
            if failed:
                raise DependencyFailed(f"OpenSearch could not erase the user: {failed[0].get('error')}")
            deleted.update(ids)
            total += len(ids)
        return total

    # ------------------------------------------------------------------ reads
    def source(self, tenant: str, user_id: str, memory_id: str) -> dict[str, Any] | None:
        found = self._latest(tenant, user_id, [memory_id]).get(memory_id)
        return found[1] if found else None

    def sources(
        self, tenant: str, user_id: str, ids: builtins.list[str], *, embedding: bool
    ) -> dict[str, dict[str, Any]]:
        return {i: s for i, (_, s) in self._latest(tenant, user_id, ids, vectors=embedding).items()}

    def collapse(self, hits: builtins.list[dict[str, Any]]) -> builtins.list[MemoryRecord]:
        """One record per memory: the newest copy among the hits, in the hits' order."""
        newest: dict[str, dict[str, Any]] = {}
        for hit in hits:
            source = hit["_source"]
            key = source.get("doc_id") or source["memory_id"]
            if key not in newest or int(source.get("revision", 0)) > int(newest[key].get("revision", 0)):
                newest[key] = source
        seen, out = set(), []
        for hit in hits:
            key = hit["_source"].get("doc_id") or hit["_source"]["memory_id"]
            if key not in seen:
                seen.add(key)
                out.append(mapping.from_source(newest[key]))
        return out
