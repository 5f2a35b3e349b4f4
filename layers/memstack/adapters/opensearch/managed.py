"""Documents on a managed OpenSearch domain (service ``es``, the medium and large tiers).

- Index: ``<alias>-v<N>`` from one index template (``mapping.index_template``),
  read and written through ``<alias>``. ``ensure_index`` runs once per
  container (idempotent: a concurrent creation is fine); ``reindex`` copies
  into ``-v<N+1>`` and swaps the alias in one ``_aliases`` call, so the
  mapping can change without downtime.
- Ids: each document's ``_id`` is ``mapping.doc_id`` (tenant, user, memory),
  so reads by id are a realtime ``GET``/``_mget``.
- Writes: bulk with the refresh policy from settings. ``supersede`` sends the
  retired old version (``is_current=false``, guarded by
  ``if_seq_no``/``if_primary_term``) and the new version in ONE bulk request;
  bulk is not a transaction, so when exactly one half fails the other is
  undone before ``Conflict`` is raised.
- Erase: the erasure marker first (``<alias>-erasures``, one document per
  hashed tenant + user, no user id in it), then a refresh (so writes sent
  without one are found), a delete-by-query on tenant + user, waited for,
  refreshed and counted, then a background force merge with
  ``only_expunge_deletes`` so the deleted documents leave the segments.
- Fence: the marker is read with a realtime GET (the store reads it before and
  after each fenced write: either the erase's delete-by-query sees the write,
  or the write's second read sees the marker).
"""

from __future__ import annotations

import builtins
import time
from typing import Any

from memstack.adapters.opensearch import mapping, queries
from memstack.adapters.opensearch.documents import OK, write_failure
from memstack.adapters.opensearch.index import Op, OpenSearchIndex, status_of
from memstack.domain.erasure import RETENTION_SECONDS, erasure_key
from memstack.errors import Conflict, DependencyFailed
from memstack.models import MemoryRecord
from memstack.ports.tenant_config import TenantConfigStore


class ManagedDocuments:
    """``Documents`` on a managed domain: own ``_id``s, ``if_seq_no``, refresh, delete-by-query."""

    successor_window = 1

    def __init__(self, index: OpenSearchIndex) -> None:
        self.index = index

    @property
    def alias(self) -> str:
        return self.index.alias

    @property
    def client(self) -> Any:
        return self.index.client

    def tenant_config_store(self) -> TenantConfigStore:
        """Realtime reads, ``op_type=create`` / ``if_seq_no`` writes (``tenant_config``)."""
        from memstack.adapters.opensearch.tenant_config import OpenSearchTenantConfigStore

        return OpenSearchTenantConfigStore(self.index)

    # ------------------------------------------------------------------ index
    def template_body(self) -> dict[str, Any]:
        ix = self.index
        return mapping.index_template(
            ix.alias,
            embedding_dim=ix.embedding_dim,
            coarse_dim=ix.coarse_dim,
            engine=ix.engine,
            m=ix.m,
            ef_construction=ix.ef_construction,
        )

    def ensure_index(self) -> None:
        """Put the index template; create ``<alias>-v1`` behind the alias, or add new fields to its index."""
        call = self.index.call
        call(
            "put index template",
            self.client.indices.put_index_template,
            name=self.alias,
            body=self.template_body(),
        )
        if call("check alias", self.client.indices.exists_alias, name=self.alias):
            self.index.add_new_fields()  # an index made from an older template
        else:
            self.index.create(mapping.index_name(self.alias, 1), {"aliases": {self.alias: {}}})
        self.index.ready = True

    def reindex(self) -> str:
        """Copy everything into a new ``-v<N+1>`` index (current template) and move the alias to it."""
        if not self.index.ready:
            self.ensure_index()
        call = self.index.call
        current = sorted(call("get alias", self.client.indices.get_alias, name=self.alias))
        old = current[-1]
        new = mapping.index_name(self.alias, int(old.rsplit("-v", 1)[1]) + 1)
        call(
            "put index template",
            self.client.indices.put_index_template,
            name=self.alias,
            body=self.template_body(),
        )
        call("create index", self.client.indices.create, index=new, body={})
        call(
            "reindex",
            self.client.reindex,
            body={"source": {"index": old}, "dest": {"index": new}},
            wait_for_completion=True,
            refresh=True,
        )
        actions = [{"remove": {"index": i, "alias": self.alias}} for i in current]
        call(
            "swap alias",
            self.client.indices.update_aliases,
            body={"actions": [*actions, {"add": {"index": new, "alias": self.alias}}]},
        )
        return new

    def drop_index(self) -> None:
        """Delete every index of this alias and its template (tests and teardown only)."""
        self.index.call("delete index", self.client.indices.delete, index=f"{self.alias}-v*")
        self.index.call("delete template", self.client.indices.delete_index_template, name=self.alias)
        self.index.ready = False

    # ------------------------------------------------------------ erase fence
    @property
    def erasures_index(self) -> str:
        """Where erasure markers live: outside ``<alias>-v*``, so no memory template or search sees them."""
        return f"{self.alias}-erasures"

    def erased_at(self, tenant: str, user_id: str) -> float | None:
        """When the user was last erased (epoch seconds), from a realtime GET of the marker."""
        try:
            got = self.index.call(
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

    def record_erasure(self, tenant: str, user_id: str) -> None:
        now = time.time()
        self.index.call(
            "record erasure",
            self.client.index,
            index=self.erasures_index,
            id=erasure_key(tenant, user_id),
            body={"erased_at": now, "expires_at": int(now + RETENTION_SECONDS)},
            refresh="true",
        )

    # ----------------------------------------------------------------- writes
    def _create_op(self, record: MemoryRecord) -> Op:
        did = mapping.doc_id(record.tenant, record.user_id, record.id)
        return {"create": {"_index": self.alias, "_id": did}}, mapping.to_doc(record)

    def _delete_op(self, tenant: str, user_id: str, memory_id: str) -> Op:
        return self.index.delete_ops([mapping.doc_id(tenant, user_id, memory_id)])[0]

    def put(self, records: builtins.list[MemoryRecord]) -> builtins.list[Op]:
        results = self.index.bulk([self._create_op(r) for r in records])
        failed = [(r, res) for r, res in zip(records, results, strict=True) if res.get("status") not in OK]
        if failed:
            # All or nothing, as the other backends: take back what this call did create.
            created = [r for r, res in zip(records, results, strict=True) if res.get("status") in OK]
            if created:
                self.index.bulk([self._delete_op(r.tenant, r.user_id, r.id) for r in created])
            record, result = failed[0]
            raise write_failure(result, f"memory {record.id} already exists")
        return [self._delete_op(r.tenant, r.user_id, r.id) for r in records]

    def supersede(self, tenant: str, user_id: str, old_id: str, new: MemoryRecord) -> builtins.list[Op]:
        old_did = mapping.doc_id(tenant, user_id, old_id)
        got = self._get(old_did, vectors=True)
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
        retire_result, create_result = self.index.bulk(ops)
        retired_ok = retire_result.get("status") in OK
        created_ok = create_result.get("status") in OK
        if retired_ok and created_ok:
            return [self._delete_op(tenant, user_id, new.id)]
        if created_ok:  # a concurrent update retired the old version first: withdraw ours
            self.index.bulk([self._delete_op(tenant, user_id, new.id)])
            raise write_failure(retire_result, f"memory {old_id} is not the current version")
        if retired_ok:  # the new id was taken: put the old version back as it was
            back = {"if_seq_no": retire_result["_seq_no"], "if_primary_term": retire_result["_primary_term"]}
            self.index.bulk([({"index": {"_index": self.alias, "_id": old_did, **back}}, source)])
            raise write_failure(create_result, f"memory {new.id} already exists")
        raise write_failure(retire_result, f"memory {old_id} is not the current version")

    def mark(self, tenant: str, user_id: str, ids: builtins.list[str], fields: dict[str, object]) -> int:
        ops: builtins.list[Op] = []
        for memory_id, source in self.sources(tenant, user_id, ids, embedding=False).items():
            record = mapping.from_source(source)
            if all(record.metadata.get(k) == v for k, v in fields.items()):
                continue
            metadata = {**record.metadata, **fields}
            ops.append(
                (
                    {"update": {"_index": self.alias, "_id": mapping.doc_id(tenant, user_id, memory_id)}},
                    {"doc": {"metadata": metadata, **mapping.metadata_fields(metadata)}},
                )
            )
        if not ops:
            return 0
        results = self.index.bulk(ops)
        return sum(1 for res in results if res.get("status") in OK and res.get("result") == "updated")

    def link_conflicts(self, tenant: str, user_id: str, links: dict[str, builtins.list[str]]) -> int:
        ops: builtins.list[Op] = []
        for memory_id, source in self.sources(tenant, user_id, list(links), embedding=False).items():
            have = list(source.get("conflicts_with") or [])
            new = list(dict.fromkeys([*have, *links[memory_id]]))
            if new == have:
                continue
            ops.append(
                (
                    {"update": {"_index": self.alias, "_id": mapping.doc_id(tenant, user_id, memory_id)}},
                    {"doc": {"conflicts_with": new}},
                )
            )
        if not ops:
            return 0
        results = self.index.bulk(ops)
        return sum(1 for res in results if res.get("status") in OK and res.get("result") == "updated")

    def erase(self, tenant: str, user_id: str) -> int:
        # Writes sent without a refresh are not searchable yet; delete-by-query only finds what is.
        self.index.call("refresh", self.client.indices.refresh, index=self.alias)
        deleted = self._delete_by_query(tenant, user_id)
        # Deleted documents stay in their segments until a merge: expunge them (in the background).
        self.index.call(
            "expunge deletes",
            self.client.indices.forcemerge,
            index=self.alias,
            only_expunge_deletes=True,
            wait_for_completion=False,
        )
        return deleted

    def _delete_by_query(self, tenant: str, user_id: str) -> int:
        deleted = 0
        for _ in range(self.index.attempts):
            response = self.index.call(
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
    def _get(self, did: str, *, vectors: bool = False) -> dict[str, Any] | None:
        kwargs: dict[str, Any] = {"index": self.alias, "id": did}
        if not vectors:
            kwargs["_source_excludes"] = queries.NO_VECTORS
        try:
            got = self.index.call("get", self.client.get, expect=(404,), **kwargs)
        except Exception as exc:
            if status_of(exc) == 404:
                return None
            raise
        return got if isinstance(got, dict) and got.get("found", True) else None

    def source(self, tenant: str, user_id: str, memory_id: str) -> dict[str, Any] | None:
        got = self._get(mapping.doc_id(tenant, user_id, memory_id))
        if not got:
            return None
        source: dict[str, Any] = got["_source"]
        return source if (source.get("tenant"), source.get("user_id")) == (tenant, user_id) else None

    def sources(
        self, tenant: str, user_id: str, ids: builtins.list[str], *, embedding: bool
    ) -> dict[str, dict[str, Any]]:
        fields: dict[str, Any] = (
            {"_source_includes": ["memory_id", "tenant", "user_id", "embedding_full"]}
            if embedding
            else {"_source_excludes": queries.NO_VECTORS}
        )
        dids = [mapping.doc_id(tenant, user_id, i) for i in dict.fromkeys(ids)]
        response = self.index.call("mget", self.client.mget, index=self.alias, body={"ids": dids}, **fields)
        return {
            d["_source"]["memory_id"]: d["_source"]
            for d in response.get("docs", [])
            if d.get("found")
            and d["_source"].get("tenant") == tenant
            and d["_source"].get("user_id") == user_id
        }

    def collapse(self, hits: builtins.list[dict[str, Any]]) -> builtins.list[MemoryRecord]:
        """A domain holds one document per memory: every hit is a record."""
        return [mapping.from_source(h["_source"]) for h in hits]
